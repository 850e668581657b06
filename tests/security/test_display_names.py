"""Names others read (security review N9, N10): team and user names, run ids and descriptions with control,
invisible or direction-changing characters, mixed alphabets, or a team name that looks like another's or the human
reference's are refused where they are made; what the command line prints never drives the terminal."""

from __future__ import annotations

import io

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from unpooled.cli.main import main
from unpooled.cli.terminal import printable
from unpooled.service.accounts.actions import AccountError, do_sign_up
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import Submission, Team
from unpooled.service.submissions.names import hidden_character, looks_like, name_problem, skeleton

from ..service.test_api import auth, corpus, is_error, kb_text, people  # noqa: F401 - fixtures

#: the review's accepted names (N9, N10)
HOSTILE_TEAMS = ["\u0422eamA", "TeamA\u200b", "\u202eAmaeT", "[human reference]\u200b", "[human r\u0435ference]",
                 "Team\x1b[31mRed"]


@pytest.mark.parametrize("name", ["Équipe Montréal", "Команда", "東京大学 NLP", "team-1 (v2)", "Ελληνική ομάδα"])
def test_names_in_one_alphabet_are_taken(name):
    assert name_problem(name, "team") is None


@pytest.mark.parametrize("name", ["\u0430lice", "Team\x1b[31mRed", "a\u200bb", "\u202eevil", "x\u2028y", "tab\tname"])
def test_hidden_characters_and_mixed_alphabets_are_refused(name):
    why = name_problem(name, "team")
    assert why is not None and why.startswith("team: ")


def test_a_description_may_hold_lines_but_nothing_hidden():
    assert hidden_character("two\nlines\tand a tab", multiline=True) is None
    assert "U+202E" in hidden_character("see \u202etxet", multiline=True)
    assert "U+001B" in hidden_character("\x1b[2J", multiline=True)


def test_look_alike_team_names_are_found_case_and_compatibility_aside():
    assert skeleton("\u0422EAMA") == skeleton("teama") == skeleton("ＴｅａｍＡ")
    assert looks_like("ТЕАМА", ["Other", "TeamA"]) == "TeamA"
    assert looks_like("teama", ["TeamA"]) is None  # the same name: joining it is another check


@pytest.mark.django_db
def test_sign_up_refuses_the_review_s_team_and_user_names(people):
    do_sign_up("carol", "pw-carol-5512", team="TeamA")
    for i, name in enumerate(HOSTILE_TEAMS):
        with pytest.raises(AccountError) as exc:
            do_sign_up(f"mallory{i}", "pw-mallory-5512", team=name)
        assert exc.value.code == "team_invalid", (name, exc.value)
    with pytest.raises(AccountError, match="mixes Cyrillic and Latin letters"):
        do_sign_up("\u0430lice2", "pw-alice-5512", team="Fresh")
    # a name is stored compatibility-normalised: a full-width name is the team itself, a no-break space a space
    with pytest.raises(AccountError) as exc:
        do_sign_up("erin", "pw-erin-5512", team="ＴｅａｍＡ")
    assert exc.value.code == "team_exists"
    do_sign_up("dave", "pw-dave-5512", team="Blue\u00a0Lab")
    assert Team.objects.filter(name="Blue Lab").exists()
    assert not Submission.objects.exists()


@pytest.mark.django_db
def test_uploads_refuse_hidden_characters_in_the_run_and_the_description(corpus, people, tmp_path):
    c = Client()
    for run, description, field in (("run\x1b]0;PWNED\x07", "", "run"), ("fine", "see \u202etxet", "description")):
        body = is_error(c.post("/api/submissions", {"corpus": "fixture", "run": run, "format": "tac",
                                                    "description": description,
                                                    "file": io.BytesIO(kb_text("x").encode())},
                               **auth(people["red"])), 400, "invalid_request")
        assert f"{field}: character " in body["message"], body
    # the command line's ingest (organisers): a run id in the file is checked as well, at line 1
    path = tmp_path / "escape.kb"
    path.write_text(kb_text("run\x1b[2J"))
    res = do_ingest_submission(path, "fixture", "red", None, "tac")
    assert not res.ok and res.report.errors[0].code == "UP104" and "U+001B" in res.report.errors[0].message
    assert not Submission.objects.exists()


@pytest.mark.django_db
def test_the_command_line_prints_data_s_control_characters_as_escapes(corpus, people, tmp_path, capsys):
    path = tmp_path / "a.kb"
    path.write_text(kb_text("plain"))
    res = do_ingest_submission(path, "fixture", "red", "plain", "tac")
    assert res.ok
    # a run id stored before names were checked
    Submission.objects.filter(pk=res.submission.pk).update(run_id="run\x1b]0;PWNED-TITLE\x07\x1b[31mRED\u202e")
    assert main(["submission", "list"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "red/run\\u001b]0;PWNED-TITLE\\u0007\\u001b[31mRED\\u202e" in out


@pytest.mark.django_db
def test_names_stored_before_the_checks_are_isolated_on_pages(corpus, people, tmp_path):
    """A team name or run id with a direction override, stored before names were checked, cannot turn the text
    around it on the pages that list it: each name is its own <bdi>."""
    path = tmp_path / "a.kb"
    path.write_text(kb_text("plain"))
    res = do_ingest_submission(path, "fixture", "red", "plain", "tac")
    Submission.objects.filter(pk=res.submission.pk).update(run_id="‮diputs")
    Team.objects.filter(name="red").update(name="red‮")
    listing = Client().get("/submissions/").content.decode()
    assert (f'<bdi>red‮</bdi></a> / <a href="/submissions/{res.submission.pk}/" class="run"><bdi>‮diputs</bdi></a>'
            in listing)
    page = Client().get(f"/submissions/{res.submission.pk}/").content.decode()
    assert f"<h1>Submission {res.submission.pk}: <bdi>red‮</bdi> / <bdi>‮diputs</bdi></h1>" in page


@given(st.text())
def test_printable_leaves_no_control_or_invisible_character(text):
    import unicodedata

    out = printable(text)
    assert all(ch in "\n\t" or unicodedata.category(ch) not in ("Cc",) for ch in out)
    assert not set(out) & {"\u200b", "\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066",
                           "\u2067", "\u2068", "\u2069", "\ufeff", "\u2028", "\u2029"}
    assert printable(out) == out  # escaping again changes nothing: an escape is plain text
