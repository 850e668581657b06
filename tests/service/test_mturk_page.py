"""The console's Mechanical Turk page (issue 25 #10) and organisers' own API tokens: who may see and use them,
what the page says from the database, what it asks Amazon (botocore's Stubber stands in for Amazon), and that no
secret is ever shown."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone as dt_timezone

import boto3
import pytest
from botocore.stub import Stubber
from django.test import Client
from django.urls import reverse

from unpooled.service.accounts.models import Role
from unpooled.service.annotation.models import Annotator, Answer, Assignment, Hit, Kind, Task
from unpooled.service.crowd.mturk import SANDBOX_ENDPOINT, MTurkBackend, MTurkConfig
from unpooled.service.crowd.mturk_sync import item_token
from unpooled.service.organiser import mturk_page

from .test_organiser import _login, _user, world  # noqa: F401 - the fixture: a corpus with verification tasks

pytestmark = pytest.mark.django_db

SECRET = "wJalrXUtnFEMI-sekrit-K7MDENG"
KEY_ID = "AKIAUNPOOLEDTESTKEY1"
HIT_ID = "3" + "A" * 29


@pytest.fixture
def aws(monkeypatch, tmp_path):
    """Credentials in the environment only (no file, no instance role looked up)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("UNPOOLED_MTURK_PRODUCTION", raising=False)


@pytest.fixture
def amazon(monkeypatch, aws):
    """The page's MTurk adapter on a client whose calls botocore's Stubber answers."""
    client = boto3.client("mturk", region_name="us-east-1", endpoint_url=SANDBOX_ENDPOINT)
    with Stubber(client) as stub:
        monkeypatch.setattr(mturk_page, "make_backend", lambda: MTurkBackend(client, MTurkConfig(), sleep=lambda s: None))
        yield stub
        stub.assert_no_pending_responses()


def _url(corpus) -> str:
    return f"{reverse('organiser:mturk')}?corpus={corpus.name}"


def test_only_organisers_see_or_use_the_page(client, world, aws):  # noqa: F811
    corpus, sub = world
    url = _url(corpus)
    assert client.get(url)["Location"].startswith(reverse("login"))
    assert client.post(url, {"action": "balance", "corpus": corpus.name})["Location"].startswith(reverse("login"))
    _login(client, "sam", role=Role.SUBMITTER)
    assert client.get(url).status_code == 403
    assert client.post(url, {"action": "balance", "corpus": corpus.name}).status_code == 403
    client.logout()
    _login(client, "ann", role=Role.ANNOTATOR)
    assert client.get(url).status_code == 403
    client.logout()
    _login(client, "olga", staff=True, role=Role.ORGANISER)
    assert client.get(url).status_code == 200
    strict = Client(enforce_csrf_checks=True)
    assert strict.login(username="olga", password="pw-olga-123")
    assert strict.post(url, {"action": "balance", "corpus": corpus.name}).status_code == 403  # no CSRF token


def test_the_page_says_mode_credentials_and_counts_and_never_a_secret(client, world, aws, monkeypatch):  # noqa: F811
    corpus, sub = world
    _login(client, "olga", staff=True, role=Role.ORGANISER)
    tasks = list(Task.objects.filter(corpus=corpus, kind=Kind.VERIFY).order_by("pk")[:3])
    Hit.objects.create(task=tasks[0], request_token="t0", hit_id=HIT_ID, max_assignments=3, status="posted",
                       approved=["A1", "A2"], rejected=["A3"])
    Hit.objects.create(task=tasks[1], request_token="t1", hit_id="3" + "B" * 29, max_assignments=3, status="expired")
    Hit.objects.create(task=tasks[2], request_token="t2", max_assignments=3)  # written before Amazon answered
    worker = Annotator.objects.create(backend="mturk", external_id="W1")
    for i, quarantined in enumerate((False, False, True)):
        now = datetime.now(dt_timezone.utc)
        lease = Assignment.objects.create(task=tasks[0], annotator=worker, external_ref=f"{HIT_ID}/A{i}",
                                          token=f"lease-{i}", leased=now, expires=now + timedelta(hours=1))
        Answer.objects.create(task=tasks[0], annotator=worker, assignment=lease, value={}, quarantined=quarantined)
    html = client.get(_url(corpus)).content.decode()
    assert "<strong>sandbox</strong>" in html and SANDBOX_ENDPOINT in html
    assert "found, in environment variables" in html
    assert SECRET not in html and KEY_ID not in html and KEY_ID[4:] not in html
    assert 'id="hits-published">2 <span class="muted">(1 live, 1 ended)' in html and "go to its simulated crowd" in html
    assert "3 from 1 worker: 2 confirmed by Amazon, 1 waiting for confirmation" in html
    assert 'id="assignments-paid">2 / 1<' in html
    assert "UNPOOLED_PUBLIC_URL</code> is needed" in html and 'id="mturk-not-chosen"' in html  # simulated crowd
    monkeypatch.setenv("UNPOOLED_MTURK_PRODUCTION", "1")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    html = client.get(_url(corpus)).content.decode()
    assert "<strong>production</strong>" in html and "none found" in html


def test_balance_and_reconcile_ask_amazon(client, world, amazon):  # noqa: F811
    corpus, sub = world
    _login(client, "olga", staff=True, role=Role.ORGANISER)
    amazon.add_response("get_account_balance", {"AvailableBalance": "10000.00"}, {})
    html = client.post(_url(corpus), {"action": "balance", "corpus": corpus.name}).content.decode()
    assert "Balance: <strong>$10000.00</strong> (the sandbox's play money)" in html
    task = Task.objects.filter(corpus=corpus, kind=Kind.VERIFY).order_by("pk").first()
    hit = Hit.objects.create(task=task, request_token="t0", max_assignments=3)   # Amazon has it; we lost its id
    amazon.add_response("list_hits", {"HITs": [{"HITId": HIT_ID, "RequesterAnnotation": item_token(task),
                                                "HITStatus": "Assignable", "MaxAssignments": 3}], "NumResults": 1},
                        {"MaxResults": 100})
    amazon.add_response("list_assignments_for_hit", {"Assignments": [], "NumResults": 0},
                        {"HITId": HIT_ID, "MaxResults": 100, "AssignmentStatuses": ["Submitted"]})
    html = client.post(_url(corpus), {"action": "reconcile", "corpus": corpus.name}).content.decode()
    assert "Reconciled: 1 HIT adopted, 0 of ours Amazon has that no task knows, 0 recorded here" in html
    hit.refresh_from_db()
    assert hit.hit_id == HIT_ID and 'id="hits-published">1' in html
    amazon.add_client_error("get_account_balance", "RequestError", "The AWS Access Key Id needs a subscription", 400)
    html = client.post(_url(corpus), {"action": "balance", "corpus": corpus.name}).content.decode()
    # a fixed sentence with Amazon's code; its message (account ids, request ids) only in the log
    assert "Mechanical Turk refused the call (it answered RequestError)" in html and "needs a subscription" not in html
    amazon.add_client_error("get_account_balance", "ServiceUnavailable", "down at 10.1.2.3", 503)
    amazon.add_client_error("get_account_balance", "ServiceUnavailable", "down at 10.1.2.3", 503)
    amazon.add_client_error("get_account_balance", "ServiceUnavailable", "down at 10.1.2.3", 503)
    amazon.add_client_error("get_account_balance", "ServiceUnavailable", "down at 10.1.2.3", 503)
    amazon.add_client_error("get_account_balance", "ServiceUnavailable", "down at 10.1.2.3", 503)
    html = client.post(_url(corpus), {"action": "balance", "corpus": corpus.name}).content.decode()
    assert "Mechanical Turk is busy or unavailable (it answered ServiceUnavailable)" in html and "10.1.2.3" not in html
    r = client.post(_url(corpus), {"action": "publish", "corpus": corpus.name})
    assert r.status_code == 400 and "expected balance or reconcile" in r.content.decode()


def test_an_organiser_makes_a_token_on_the_web_and_it_acts_as_them(client, world):  # noqa: F811
    from unpooled.service.accounts.actions import authenticate_token, do_set_role
    from unpooled.service.accounts.models import ApiToken

    corpus, sub = world
    org = _login(client, "olga", staff=True, role=Role.ORGANISER)
    page = client.get(reverse("accounts:account")).content.decode()
    assert 'id="make-token"' in page and "act as you, an organiser" in page
    html = client.post(reverse("accounts:token_create"), {"name": "console"}).content.decode()
    raw = html.split('id="new-token">')[1].split("<")[0]
    tok = ApiToken.objects.get(user=org)
    assert tok.team is None and authenticate_token(raw) == tok
    api = Client()
    labels = api.get(f"/api/corpora/{corpus.name}/labels", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert labels.status_code == 200, labels.content          # the label pool: organisers only
    assert "labels" in api.get(f"/api/corpora/{corpus.name}", HTTP_AUTHORIZATION=f"Bearer {raw}").json()["counts"]
    assert raw not in client.get(reverse("accounts:account")).content.decode()  # shown once
    # a submitter cannot revoke it; an annotator cannot make one
    other = Client()
    _user("sam", role=Role.SUBMITTER)
    assert other.login(username="sam", password="pw-sam-123")
    other.post(reverse("accounts:token_revoke", args=[tok.pk]))
    tok.refresh_from_db()
    assert tok.revoked is None
    ann = Client()
    _user("ann", role=Role.ANNOTATOR)
    assert ann.login(username="ann", password="pw-ann-123")
    ann.post(reverse("accounts:token_create"), {"name": "x"})
    assert not ApiToken.objects.filter(user__username="ann").exists()
    # the token dies with the organiser's role
    do_set_role(org, Role.ANNOTATOR)
    assert authenticate_token(raw) is None
