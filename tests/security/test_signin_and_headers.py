"""Sign-in throttling and password rules (review finding D10, 3c), cookies and security headers (3d, D2's CSP):
real pages through Django's client, the settings as ``UNPOOLED_SECURE`` makes them in a fresh interpreter."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from unpooled.service.accounts import throttle

SERVICE = Path(__file__).resolve().parents[2] / "src" / "unpooled" / "service"
PASSWORD = "pw-alice-8262"


def _login(client: Client, username: str, password: str, addr: str, path: str = "/accounts/login/"):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=addr)


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.fixture
def alice(db):
    from django.core.cache import caches

    caches["default"].clear()
    caches["signin"].clear()
    return User.objects.create_user("alice", password=PASSWORD)


@pytest.fixture
def clock(monkeypatch):
    """The throttle's clock (and the cache's: both read time.time), moved by hand."""
    now = [time.time()]
    monkeypatch.setattr(throttle.time, "time", lambda: now[0])
    return now


def test_wrong_passwords_are_throttled_per_account_and_address(alice, clock):
    """The probe: 40 wrong passwords then the right one signed in.  Now the 6th attempt from that address is
    refused, the right password included, with a message; another address is not affected; after the window
    the owner signs in."""
    c = Client()
    refused = 0
    for i in range(40):
        r = _login(c, "alice", f"wrong-{i}", "10.0.0.1")
        assert r.status_code == 200 and not _signed_in(c)
        refused += "Too many failed sign-ins" in r.content.decode()
    assert refused == 40 - throttle.PER_PAIR
    r = _login(c, "alice", PASSWORD, "10.0.0.1")
    assert not _signed_in(c) and "try again in 15 minutes" in r.content.decode()
    # the admin's sign-in goes through the same check
    _login(c, "alice", PASSWORD, "10.0.0.1", "/admin/login/?next=/admin/")
    assert not _signed_in(c)
    # the owner, from their own address, is not locked out by the attack
    other = Client()
    assert _login(other, "alice", PASSWORD, "10.9.9.9").status_code == 302 and _signed_in(other)
    # nor for ever from the attacked address: the window ends
    clock[0] += throttle.WINDOW + 1
    assert _login(c, "alice", PASSWORD, "10.0.0.1").status_code == 302 and _signed_in(c)


def test_one_address_guessing_many_accounts_is_throttled(alice, clock):
    bob = User.objects.create_user("bob", password=PASSWORD)
    assert _login(Client(), "bob", PASSWORD, "10.0.0.2").status_code == 302  # bob signs in there usually
    c = Client()
    for i in range(throttle.PER_ADDRESS):
        _login(c, f"user{i}", "guess", "10.0.0.2")
    r = _login(c, "alice", PASSWORD, "10.0.0.2")
    assert not _signed_in(c) and "Too many failed sign-ins" in r.content.decode()
    assert _login(Client(), "alice", PASSWORD, "10.0.0.3").status_code == 302
    # an account that signed in from the address before is not locked out by the others' failures there
    # (one proxy or campus address for many people)
    b = Client()
    assert _login(b, bob.username, PASSWORD, "10.0.0.2").status_code == 302 and _signed_in(b)


def test_a_guess_spread_over_addresses_spares_known_addresses(alice, clock):
    home = Client()
    assert _login(home, "alice", PASSWORD, "192.0.2.7").status_code == 302  # alice signs in from home once
    for i in range(throttle.PER_ACCOUNT):
        _login(Client(), "alice", "guess", f"10.1.{i // 250}.{i % 250}")
    r = _login(Client(), "alice", PASSWORD, "10.2.0.1")
    assert "Too many failed sign-ins" in r.content.decode()  # a new address waits
    again = Client()
    assert _login(again, "alice", PASSWORD, "192.0.2.7").status_code == 302 and _signed_in(again)  # home does not
    clock[0] += throttle.ACCOUNT_WINDOW + 1
    assert _login(Client(), "alice", PASSWORD, "10.2.0.1").status_code == 302


def test_passwords_are_validated_at_sign_up(db):
    c = Client()
    for username, pw, says in (("bob", "password", "too common"), ("bob", "12345678", "entirely numeric"),
                               ("carolinex", "carolinex1", "too similar"), ("bob", "short", "at least 8")):
        r = c.post(reverse("accounts:signup"), {"username": username, "password": pw, "role": "submitter",
                                                "team": "t"})
        assert says in r.content.decode(), (pw, r.content.decode()[:2000])
    assert not User.objects.exists()
    r = c.post(reverse("accounts:signup"), {"username": "bob", "password": "a-long-password-9", "role": "submitter",
                                            "team": "t"})
    assert r.status_code == 302 and User.objects.filter(username="bob").exists()


# --------------------------------------------------------------------------- headers and cookies

PAGES = ["/", "/accounts/login/", "/accounts/signup/", "/submissions/", "/api/docs", "/admin/login/",
         "/annotate/mturk/?task=1&sig=x"]


def test_every_page_has_a_policy_without_inline_script(alice):
    org = User.objects.create_user("org", password="pw-org-81234", is_staff=True, is_superuser=True)
    for who in (None, alice, org):
        c = Client()
        if who is not None:
            c.force_login(who)
        for path in PAGES + (["/organiser/", "/accounts/", "/accounts/invites/", "/admin/"] if who is org else []):
            r = c.get(path)
            csp = r.get("Content-Security-Policy", "")
            directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
            assert directives["script-src"] == "'self'", (path, csp)
            assert directives["object-src"] == "'none'" and directives["base-uri"] == "'none'"
            assert directives["form-action"] == "'self'"
            if path.startswith("/annotate/mturk/"):  # shown in Mechanical Turk's frame, and only there
                assert directives["frame-ancestors"] == "https://www.mturk.com https://workersandbox.mturk.com"
                assert "X-Frame-Options" not in r
            else:
                assert directives["frame-ancestors"] == "'none'" and r["X-Frame-Options"] == "DENY"
            assert r["X-Content-Type-Options"] == "nosniff"
            assert r["Referrer-Policy"] == "same-origin"
            if r.status_code == 200 and r["Content-Type"].startswith("text/html"):
                html = r.content.decode()
                for tag in re.findall(r"<script\b[^>]*>", html):
                    assert "src=" in tag or 'type="application/json"' in tag, (path, tag)
                assert not re.search(r"\son[a-z]+\s*=", html, re.I), path


def test_no_template_holds_inline_script_or_handlers():
    """Every page's script is a static file (the policy would block the rest): no template or Python-built
    page has an inline <script>, an on…= attribute, a javascript: URL or a <style> element."""
    sources = list(SERVICE.rglob("templates/**/*.html")) + [SERVICE / "api" / "docs.py"]
    assert len(sources) > 30
    for path in sources:
        text = path.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            assert "src=" in tag or "application/json" in tag, (path, tag)
        assert not re.search(r"<[a-z][^>]*\son[a-z]+\s*=", text, re.I), path
        assert "javascript:" not in text.lower() and "<style" not in text, path


def test_cookies_are_http_only_and_same_site(alice):
    c = Client()
    c.get("/accounts/login/")
    r = _login(c, "alice", PASSWORD, "10.0.0.9")
    session, csrf = r.cookies["sessionid"], c.cookies["csrftoken"]
    assert session["httponly"] and session["samesite"] == "Lax" and not session["secure"]
    assert csrf["httponly"] and csrf["samesite"] == "Lax"


def test_unpooled_secure_turns_on_secure_cookies_and_hsts(tmp_path):
    """The one setting for deployments behind TLS, read by the real settings module in a fresh interpreter."""
    code = ("import json; from unpooled.service.config import settings as s; print(json.dumps([s.SESSION_COOKIE_SECURE,"
            " s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER]))")
    env = {k: v for k, v in os.environ.items() if k != "UNPOOLED_SECURE"}
    env["UNPOOLED_DATA_DIR"] = str(tmp_path)

    def read(**extra):
        out = subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True,
                             check=True)
        return json.loads(out.stdout)

    assert read() == [False, False, 0, None]
    assert read(UNPOOLED_SECURE="1") == [True, True, 31536000, ["HTTP_X_FORWARDED_PROTO", "https"]]


def test_behind_tls_the_responses_say_so(alice, settings):
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    c = Client()
    c.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https")
    r = c.post("/accounts/login/", {"username": "alice", "password": PASSWORD}, HTTP_X_FORWARDED_PROTO="https",
               REMOTE_ADDR="10.0.0.10")
    assert r["Strict-Transport-Security"] == "max-age=31536000"
    assert r.cookies["sessionid"]["secure"] and c.cookies["csrftoken"]["secure"]


def test_behind_the_proxy_the_address_is_the_forwarded_one(alice, clock, settings):
    """Every request comes from the proxy's address: the throttle counts the client's, the one the proxy
    appended to X-Forwarded-For (a client's own X-Forwarded-For entries come before it)."""
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    attacker = Client()
    for i in range(throttle.PER_PAIR):
        attacker.post("/accounts/login/", {"username": "alice", "password": f"x{i}"}, REMOTE_ADDR="10.0.0.1",
                      HTTP_X_FORWARDED_FOR="192.0.2.1, 198.51.100.66")
    r = attacker.post("/accounts/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="10.0.0.1",
                      HTTP_X_FORWARDED_FOR="198.51.100.9, 198.51.100.66")  # a forged first entry changes nothing
    assert not _signed_in(attacker) and "Too many failed sign-ins" in r.content.decode()
    owner = Client()
    owner.post("/accounts/login/", {"username": "alice", "password": PASSWORD}, REMOTE_ADDR="10.0.0.1",
               HTTP_X_FORWARDED_FOR="203.0.113.5")
    assert _signed_in(owner)


def test_no_password_reset_and_signing_out_lands_on_the_home_page(alice):
    """Security review N15: the password-reset form was live without mail or throttle; the UX review's #4: signing
    out showed the Django admin's "Logged out" page."""
    c = Client()
    for path in ("/accounts/password_reset/", "/accounts/password_reset/done/", "/accounts/reset/done/"):
        assert c.get(path).status_code == 404, path
    assert c.post("/accounts/password_reset/", {"email": "alice@example.org"}).status_code == 404
    assert _login(c, "alice", PASSWORD, "10.0.0.9").status_code == 302 and _signed_in(c)
    r = c.post(reverse("logout"))
    assert r.status_code == 302 and r["Location"] == "/" and not _signed_in(c)
    assert c.get(reverse("password_change")).status_code == 302  # signed out: the password change asks to sign in
