"""``unpooled user add NAME --role organiser|submitter|annotator [--team T]``."""

from __future__ import annotations

import io
import json

import pytest

from unpooled.cli.main import main

pytestmark = pytest.mark.django_db


def run(capsys, *argv, stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def signs_in(name: str, password: str) -> bool:
    from django.contrib.auth import authenticate

    return authenticate(username=name, password=password) is not None


def test_organiser_with_a_generated_password(capsys):
    from django.contrib.auth.models import User

    from unpooled.service.accounts.actions import role_of

    code, out, err = run(capsys, "user", "add", "carol", "--role", "organiser")
    assert code == 0, err
    assert out.splitlines()[0] == "made organiser carol"
    pw = out.splitlines()[1].removeprefix("password: ")
    assert len(pw) >= 12 and signs_in("carol", pw) and "shown once" in err
    u = User.objects.get(username="carol")
    assert role_of(u) == "organiser" and u.is_staff  # the console and the admin


def test_submitter_in_a_team_and_annotator_with_a_password_from_stdin(capsys, monkeypatch):
    """``--role submitter`` makes a team's submitter; ``--role participant``, the command's old word, still does."""
    from django.contrib.auth.models import User

    from unpooled.service.accounts.actions import role_of, team_of
    from unpooled.service.submissions.models import Team

    code, out, err = run(capsys, "user", "add", "dave", "--role", "submitter", "--team", "UX Lab", "--create-team",
                         "--password-stdin", stdin="a-long-secret-42\n", monkeypatch=monkeypatch)
    assert code == 0, err
    assert out == "made submitter dave in team UX Lab\n"  # no password printed: the caller chose it
    assert signs_in("dave", "a-long-secret-42") and team_of(User.objects.get(username="dave")).name == "UX Lab"
    code, out, err = run(capsys, "user", "add", "erin", "--role", "participant", "--team", "ux lab", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["team"] == "UX Lab" and got["role"] == "submitter" and signs_in("erin", got["password"])
    assert Team.objects.count() == 1  # the existing team, matched without regard to case
    code, out, err = run(capsys, "user", "add", "fay", "--role", "annotator", "--password", stdin="another-secret-7\n",
                         monkeypatch=monkeypatch)
    assert code == 0 and signs_in("fay", "another-secret-7"), err
    fay = User.objects.get(username="fay")
    assert role_of(fay) == "annotator" and fay.profile.invited and not fay.is_staff


@pytest.mark.parametrize("argv, stdin, message", [
    (["gus", "--role", "admin"], None, "--role: expected organiser, submitter or annotator, got 'admin'"),
    (["gus", "--role", "submitter"], None, "--team: a submitter belongs to a team: give --team NAME"),
    (["gus", "--role", "participant", "--team", "Nowhere"], None,
     "--team: no team 'Nowhere' (teams: Red); add --create-team to make it"),
    (["carol", "--role", "annotator"], None, "NAME: a user 'carol' exists already"),
    (["CAROL", "--role", "annotator"], None, "NAME: a user 'CAROL' exists already"),
    (["bad name!", "--role", "annotator"], None, "NAME: 'bad name!' is not a valid user name"),
    (["gus", "--role", "annotator", "--password-stdin"], "12345678\n", "password: This password is too common."),
    (["gus", "--role", "annotator", "--password-stdin"], "\n", "--password-stdin: standard input gave no password"),
])
def test_clear_errors_and_nothing_stored(capsys, monkeypatch, argv, stdin, message):
    from django.contrib.auth.models import User

    from unpooled.service.accounts.actions import do_add_user
    from unpooled.service.submissions.models import Team

    do_add_user("carol", "organiser")
    Team.objects.create(name="Red")
    before = (User.objects.count(), Team.objects.count())
    code, out, err = run(capsys, "user", "add", *argv, stdin=stdin if stdin is not None else "",
                         monkeypatch=monkeypatch)
    assert code == 3 and out == ""
    assert err.startswith(f"unpooled: error: {message}"), err
    assert (User.objects.count(), Team.objects.count()) == before


def test_role_is_required(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["user", "add", "gus"])
    assert exc.value.code == 2 and "--role" in capsys.readouterr().err


def test_one_word_for_the_role_that_submits(capsys):
    """The command's help, its errors, the demo's terminal lines and the 403 page say "submitter", as the web and the
    docs do: not "participant" (accepted as another name for it) nor "team member" (issue 25, one vocabulary)."""
    from unpooled.cli.commands.serve import demo_banner
    from unpooled.service.web.views.errors import _hint

    with pytest.raises(SystemExit):
        main(["user", "add", "--help"])
    out = capsys.readouterr().out
    assert "submitter" in out
    assert "participants" not in out and "team member" not in out
    assert out.count("participant") == 1 and "'participant' is taken too" in " ".join(out.split()), out
    lines = "\n".join(demo_banner("http://x", [("organiser", "o", "pw"), ("submitter", "s", "pw"), ("annotator", "a", "pw")],
                                   "/tmp"))
    assert "  submitter " in lines and "http://x/submissions/" in lines and "team member" not in lines
    from unpooled.demo import DEMO_ACCOUNTS

    assert [(what, role) for what, _, role, _ in DEMO_ACCOUNTS] == [
        ("organiser", "organiser"), ("submitter", "submitter"), ("annotator", "annotator")]
    assert _hint("/submissions/new/") == ("Submitting is for submitters: members of a team.", "a submitter")


class _CountingStdin(io.StringIO):
    """Standard input that counts what is read of it."""

    read_chars = 0

    def readline(self, size=-1):
        line = super().readline(size)
        self.read_chars += len(line)
        return line


@pytest.mark.parametrize("piped, says", [
    ("\x00" * 2_000_000, "at most 200 characters"),  # a sparse file piped in: read whole (1 GiB: 3.2 GB) and taken
    ("x" * 300 + "\n", "at most 200 characters"),
    ("secret\x00secret-42\n", "without NUL characters"),
    ("caf\udce9-secret-42\n", "in UTF-8"),  # bytes that are not UTF-8 (surrogate escapes): a traceback
])
def test_a_hostile_password_on_stdin_is_refused_after_a_bounded_read(capsys, monkeypatch, piped, says):
    from django.contrib.auth.models import User

    stdin = _CountingStdin(piped)
    monkeypatch.setattr("sys.stdin", stdin)
    code = main(["user", "add", "gil", "--role", "annotator", "--password-stdin"])
    err = capsys.readouterr().err
    assert code == 3 and "password: " in err and says in err, err
    assert stdin.read_chars <= 4096
    assert not User.objects.filter(username="gil").exists()
