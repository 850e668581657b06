"""Wrong passwords sent all at once to a real server with several web processes (security review N16): the
throttle's counters are shared by the processes, and an attempt is counted before its password is checked, so no
more than the limit of them is ever checked -- the review saw 8 checked against a limit of 5 when each process read
the count, hashed the password for a few hundred milliseconds, then wrote the count back."""

from __future__ import annotations

import re
import threading
import urllib.parse
import urllib.request

import pytest

from .harness import run_py

pytestmark = pytest.mark.faults

#: unpooled.service.accounts.throttle.PER_PAIR (not imported: the test process has no Django)
PER_PAIR = 5


def _form(base: str) -> tuple[str, str]:
    """(the CSRF cookie, the form's token) of the sign-in page."""
    with urllib.request.urlopen(base + "/accounts/login/", timeout=60) as resp:
        cookie = re.search(r"csrftoken=([^;]+)", resp.headers.get("Set-Cookie", "")).group(1)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', resp.read().decode()).group(1)
    return cookie, token


def test_wrong_passwords_at_once_are_checked_no_more_than_the_limit(serve, sqlite_env):
    run_py(sqlite_env, "from django.contrib.auth.models import User\n"
                       "User.objects.create_user('alice', password='pw-alice-8262')\n")
    s = serve(sqlite_env, web_workers=3)
    s.wait_up()
    cookie, token = _form(s.url)
    got: list[str] = []
    start = threading.Barrier(30)

    def attempt(i: int) -> None:
        body = urllib.parse.urlencode({"username": "alice", "password": f"wrong-{i}",
                                       "csrfmiddlewaretoken": token}).encode()
        req = urllib.request.Request(s.url + "/accounts/login/", data=body, headers={
            "Cookie": f"csrftoken={cookie}", "Referer": s.url + "/accounts/login/"})
        start.wait()
        with urllib.request.urlopen(req, timeout=120) as resp:
            got.append(resp.read().decode())

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 30
    throttled = sum("Too many failed sign-ins" in page for page in got)
    assert 30 - throttled <= PER_PAIR, f"{30 - throttled} passwords checked against a limit of {PER_PAIR}"
    assert throttled >= 30 - PER_PAIR
