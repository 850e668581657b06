"""``unpooled serve --demo`` (what ``./dev up`` runs) answers before the demo is loaded, shows a "loading the demo"
banner with live progress on its pages, and prints the URL and the demo accounts, whose passwords work.

Real processes: serve, gunicorn, a task worker and the demo loader on a fresh SQLite data directory; the test stops
serve (by its pid) once it has seen the loader at work, so it never waits for the whole evaluation.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .harness import run_py

pytestmark = pytest.mark.faults


def status(s) -> dict:
    st, body = s.get("/demo/status.json")
    assert st == 200, (st, body[:500])
    return json.loads(body)


def test_serve_demo_answers_first_with_a_banner_and_prints_the_accounts(serve, sqlite_env):
    s = serve(sqlite_env, web_workers=1, extra=("--demo",))
    # the URL is printed once a page answers; the first answer comes while the demo is still loading: the banner
    # says so and the status endpoint agrees
    s.until(lambda: "unpooled is running at" in s.log(), "the URL")
    code, page = s.get("/")
    assert code == 200, (code, page[:500], s.tail())
    first = status(s)
    assert first["state"] == "loading" and first["step"] < max(first["steps"], 1), first
    assert 'id="demo-banner"' in page and "Loading the demo" in page, page[:3000]
    assert 'src="/static/web/demo.js"' in page and "<script>" not in page  # the CSP runs no inline script
    assert first["summary"].startswith(f"Step {first['step']} of "), first
    # the terminal: the URL, then the three accounts, then the loader's steps
    s.until(lambda: "demo: step 1/" in s.log(), "the loader's first step")
    log = s.log()
    assert f"unpooled is running at http://localhost:{s.port}/" in log, s.tail()
    accounts = dict(re.findall(r"^  (?:organiser|submitter|annotator) +(\S+) +password (\S+)", log, re.M))
    assert set(accounts) == {"demo-organiser", "demo-member", "demo-annotator"}, s.tail()
    assert log.index("is listening on port") < log.index("unpooled is running at") < log.index("demo-organiser")
    assert log.index("demo-organiser") < log.index("started demo loader") < log.index("demo: step 1/")
    # live progress: the status moves on from what the first page showed
    moved = s.until(lambda: (d := status(s))["step"] > first["step"] and d, "the progress to move on")
    assert moved["state"] in ("loading", "evaluating") and moved["steps"] >= 4, moved
    assert moved["summary"].startswith(f"Step {moved['step']} of {moved['steps']}: "), moved
    _, page = s.get("/submissions/")
    assert 'id="demo-banner"' in page  # on every page, not only the home page
    # the printed passwords sign in, with the roles they are printed for
    check = run_py(sqlite_env, f"""
from django.contrib.auth import authenticate
from unpooled.service.accounts.actions import role_of, team_of
for name, pw in sorted({accounts!r}.items()):
    u = authenticate(username=name, password=pw)
    print(name, role_of(u), team_of(u).name if team_of(u) else "-")
""")
    assert check.strip().splitlines()[-3:] == ["demo-annotator annotator -", "demo-member submitter spaCy-baseline",
                                              "demo-organiser organiser -"], check
    # stopping serve mid-load leaves no banner behind
    assert s.stop() == 0
    saved = json.loads((Path(sqlite_env["UNPOOLED_DATA_DIR"]) / "demo-progress.json").read_text())
    assert saved["state"] == "stopped", saved
    out = run_py(sqlite_env, "from unpooled.service.web.templatetags.demo_banner import demo_banner\n"
                             "print(demo_banner())")
    assert out.strip().splitlines()[-1] == "{'demo': None}", out


def test_demo_accounts_are_kept_and_never_taken_over(sqlite_env):
    """A second start prints the same passwords; an account of a demo name that the demo did not make keeps its
    password (it is printed as not known)."""
    out = run_py(sqlite_env, """
import json, os, stat
from django.conf import settings
from django.contrib.auth.models import User
from unpooled.demo import demo_accounts
User.objects.create_user("demo-annotator", password="someone-elses-42")
first = demo_accounts(settings.DATA_DIR)
second = demo_accounts(settings.DATA_DIR)
mode = stat.S_IMODE(os.stat(settings.DATA_DIR / "demo-accounts.json").st_mode)
print(json.dumps({"first": first, "second": second, "mode": oct(mode),
                  "kept": User.objects.get(username="demo-annotator").check_password("someone-elses-42")}))
""")
    got = json.loads(out.strip().splitlines()[-1])
    assert got["first"] == got["second"] and got["mode"] == "0o600" and got["kept"] is True, got
    assert [[w, n, p is not None] for w, n, p in got["first"]] == [
        ["organiser", "demo-organiser", True], ["submitter", "demo-member", True],
        ["annotator", "demo-annotator", False]]
