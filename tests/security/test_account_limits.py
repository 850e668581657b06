"""Accounts that cost the service (security review N7): sign-ups from one address are limited per day, a team holds
a bounded number of live API tokens, and a new token is shown once in the answer to its creation, never kept in the
session (first round: it stayed there until the next page)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

from unpooled.service.accounts.actions import MAX_TOKENS_PER_TEAM, AccountError, do_issue_token, do_sign_up
from unpooled.service.accounts.models import ApiToken
from unpooled.service.submissions.models import Team

from ..service.test_api import corpus, people  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def _sign_up(c: Client, i: int, addr: str):
    return c.post(reverse("accounts:signup"), {"username": f"user{i}", "password": "pw-long-enough-1",
                                               "role": "submitter", "team": f"Team {i}"}, REMOTE_ADDR=addr)


@override_settings(SIGNUPS_PER_ADDRESS=3)
def test_sign_ups_from_one_address_are_limited_per_day():
    made = [_sign_up(Client(), i, "10.7.0.1").status_code for i in range(5)]
    assert made == [302, 302, 302, 200, 200]  # the 4th and 5th stay on the form
    page = _sign_up(Client(), 9, "10.7.0.1").content.decode()
    assert "Too many accounts were made from your address today" in page
    assert User.objects.count() == 3 and Team.objects.count() == 3
    assert _sign_up(Client(), 10, "10.7.0.2").status_code == 302  # another address is not affected


def test_a_team_holds_a_bounded_number_of_live_tokens():
    alice = do_sign_up("alice", "pw-alice-5512", team="red")
    for _ in range(MAX_TOKENS_PER_TEAM):
        do_issue_token(alice, "ci")
    with pytest.raises(AccountError, match=f"has {MAX_TOKENS_PER_TEAM} live API tokens") as exc:
        do_issue_token(alice, "one more")
    assert exc.value.code == "too_many_tokens"
    tok = ApiToken.objects.filter(team__name="red").first()
    from unpooled.service.accounts.actions import do_revoke_token

    do_revoke_token(alice, tok.pk)
    do_issue_token(alice, "after a revocation")


def test_a_new_token_is_shown_in_the_answer_and_never_kept():
    alice = do_sign_up("alice", "pw-alice-5512", team="red")
    c = Client()
    c.force_login(alice)
    r = c.post(reverse("accounts:token_create"), {"name": "ci"})
    html = r.content.decode()
    assert r.status_code == 200 and 'id="new-token"' in html and r["Cache-Control"] == "no-store"
    raw = html.split('id="new-token">')[1].split("<")[0]
    assert raw.startswith("upt_") and raw not in str(dict(c.session.items()))
    assert 'id="new-token"' not in c.get(reverse("accounts:account")).content.decode()  # once


@override_settings(UPLOADS_PER_ADDRESS=2)
def test_uploads_from_one_address_are_limited_per_day_whatever_the_team(corpus, people):
    """The review made 24 teams from one address, each with its own daily quota.  Now one address may have 2 (here)
    uploads accepted or waiting in a day, across teams; another address is not affected."""
    import io

    from ..service.test_api import auth, is_error, kb_text

    def upload(team: str, run: str, addr: str):
        return Client().post("/api/submissions", {"corpus": "fixture", "run": run, "format": "tac",
                                                  "file": io.BytesIO(kb_text(run).encode())},
                             REMOTE_ADDR=addr, **auth(people[team]))

    assert upload("red", "r1", "10.8.0.1").status_code in (201, 202)
    assert upload("blue", "b1", "10.8.0.1").status_code in (201, 202)
    body = is_error(upload("blue", "b2", "10.8.0.1"), 429, "rate_limited")
    assert "2 uploads from your address were accepted or are waiting" in body["message"]
    assert upload("blue", "b2", "10.8.0.2").status_code in (201, 202)


@override_settings(TEAM_APPROVAL=True)
def test_new_teams_wait_for_an_organisers_approval(corpus, people):
    """With UNPOOLED_TEAM_APPROVAL on, a team made by sign-up may not submit until an organiser approves it on the
    console's Teams page (which, with every corpus's alerts, says how many wait); the organiser can stop it again."""
    import io

    from unpooled.service.accounts.actions import do_issue_token
    from unpooled.service.organiser import console

    from ..service.test_api import is_error, kb_text

    assert _sign_up(Client(), 1, "10.9.0.1").status_code == 302
    team = Team.objects.get(name="Team 1")
    assert not team.approved
    token = do_issue_token(User.objects.get(username="user1"), "ci")[1]

    def upload(run):
        return Client().post("/api/submissions", {"corpus": "fixture", "run": run, "format": "tac",
                                                  "file": io.BytesIO(kb_text(run).encode())},
                             HTTP_AUTHORIZATION=f"Bearer {token}")

    body = is_error(upload("t1"), 403, "team_not_approved")
    assert "waits for an organiser's approval" in body["message"]
    assert "teams_waiting" in {a.code for a in console.alerts(corpus)}
    org = Client()
    org.force_login(people["olga"])
    assert 'id="approve-%d"' % team.pk in org.get(reverse("organiser:teams")).content.decode()
    assert Client().post(reverse("organiser:team_approve", args=[team.pk])).status_code in (302, 403)  # not signed in
    assert not Team.objects.get(pk=team.pk).approved
    assert org.post(reverse("organiser:team_approve", args=[team.pk]), {"approved": "1"}).status_code == 302
    assert upload("t1").status_code in (201, 202)
    assert "teams_waiting" not in {a.code for a in console.alerts(corpus)}
    org.post(reverse("organiser:team_approve", args=[team.pk]), {"approved": "0"})
    assert is_error(upload("t2"), 403, "team_not_approved")
