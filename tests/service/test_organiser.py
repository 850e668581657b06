"""The organiser console (service/organiser/): permissions, the settings form, retrying a failed submission,
team quotas, stalled-task alerts, and every page rendering with data."""

from __future__ import annotations

import html
import re
import secrets
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from unpooled.service.accounts.models import Profile, Role
from unpooled.service.annotation import actions, leasing
from unpooled.service.annotation.models import AnnotationSettings, Annotator, Answer, Assignment, Kind, Task
from unpooled.service.crowd.simulated import SimulatedCrowd
from unpooled.service.evaluations.lifecycle import set_status
from unpooled.service.organiser import console
from unpooled.service.submissions.models import RelationInstance, Submission, Team

from ..conftest import load_redocred_subset

pytestmark = pytest.mark.django_db

PAGES = ["organiser:home", "organiser:annotation", "organiser:settings", "organiser:submissions", "organiser:teams",
         "organiser:release"]


@pytest.fixture
def world(shared_data, tmp_path):
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 3, "console", team="team-a", run="run-1")
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:8]
    actions.request_verification(sub, ids)
    return corpus, sub


def _user(name: str, *, staff: bool = False, role: str | None = None) -> User:
    u = User.objects.create_user(name, password=f"pw-{name}-123", is_staff=staff)
    if role is not None:
        Profile.objects.create(user=u, role=role)
    return u


def _login(client, name: str, **kw) -> User:
    u = _user(name, **kw)
    assert client.login(username=name, password=f"pw-{name}-123")
    return u


def _other_submission(corpus, *, status: str, run: str, team: str = "team-b", **fields) -> Submission:
    t, _ = Team.objects.get_or_create(name=team)
    sub = Submission.objects.create(corpus=corpus, team=t, run_id=run, format="jsonl",
                                    file_sha256=secrets.token_hex(32))
    set_status(sub, status, **fields)
    return sub


# ---------------------------------------------------------------------------- permissions

def test_anonymous_users_sign_in_first(client, world):
    for name in PAGES:
        r = client.get(reverse(name))
        assert r.status_code == 302 and r["Location"].startswith("/accounts/login/"), name


@pytest.mark.parametrize("role", [Role.SUBMITTER, Role.ANNOTATOR, None])
def test_everybody_but_organisers_gets_403(client, world, role):
    corpus, sub = world
    _login(client, "nobody", role=role)
    for name in PAGES:
        assert client.get(reverse(name), {"corpus": corpus.name}).status_code == 403, name
    team = Team.objects.get(name="team-a")
    set_status(sub, Submission.Status.FAILED, failed_stage="sampling", error="RuntimeError: boom")
    assert client.post(reverse("organiser:retry", args=[sub.pk])).status_code == 403
    # both retry addresses answer a missing id as they answer an existing one (security review N14: no oracle)
    for name in ("organiser:retry", "web:retry"):
        assert [client.post(reverse(name, args=[pk])).status_code for pk in (sub.pk, 999_999)] == [403, 403], name
    assert client.post(reverse("organiser:team_quota", args=[team.pk]), {f"t{team.pk}-per_day": "1"}).status_code == 403
    assert client.post(reverse("organiser:settings") + f"?corpus={corpus.name}",
                       {"answers_per_item": "1"}).status_code == 403
    sub.refresh_from_db()
    team.refresh_from_db()
    assert sub.status == Submission.Status.FAILED and team.quota_per_day is None
    assert AnnotationSettings.objects.get(corpus=corpus).answers_per_item == 3


@pytest.mark.parametrize("kw", [{"role": Role.ORGANISER}, {"staff": True}])
def test_organisers_see_every_page(client, world, kw):
    corpus, _ = world
    _login(client, "boss", **kw)
    for name in PAGES:
        r = client.get(reverse(name), {"corpus": corpus.name})
        assert r.status_code == 200, name
    assert client.get(reverse("organiser:home"), {"corpus": "no-such-corpus"}).status_code == 404


def test_console_actions_check_the_role(world):
    corpus, sub = world
    plain = _user("plain")
    set_status(sub, Submission.Status.FAILED, failed_stage="scoring", error="x")
    with pytest.raises(console.ConsoleError, match="only organisers may do this") as e:
        console.do_retry(plain, sub)
    assert e.value.status == 403
    with pytest.raises(console.ConsoleError, match="only organisers"):
        console.do_team_quota(plain, sub.team, per_day=1, total=None)
    with pytest.raises(console.ConsoleError, match="only organisers"):
        console.do_update_settings(corpus, console.current_settings(corpus), user=plain)


# ---------------------------------------------------------------------------- rendering

def test_console_renders_with_data(client, world):
    corpus, sub = world
    from unpooled.service.annotation.sampling import sample_documents

    sample_documents(corpus, "uniform", 1, seed=0)
    SimulatedCrowd.uniform(corpus, 4, accuracy=0.8, latency=12.0, rng=5).run()
    set_status(sub, Submission.Status.FAILED, failed_stage="scoring", error="ValueError: scores went wrong")
    _login(client, "boss", staff=True)
    q = {"corpus": corpus.name}

    home = client.get(reverse("organiser:home"), q).content.decode()
    assert 'id="progress"' in home and 'id="budget-bar"' in home and 'id="sections"' in home
    # a simulated crowd is not paid: its cost is what the answers would cost (review: simulated-crowd "cost")
    from unpooled.service.annotation.actions import settings_for

    simulated = settings_for(corpus).backend == "simulated"
    assert ("nothing is paid" in home) == simulated and ("(answers paid)" in home) == (not simulated)
    # the failed submission is an alert at the top, before the progress table
    assert home.index('id="alerts"') < home.index('id="progress"')
    assert f"submission {sub.pk} (team-a/run-1) failed at stage scoring: ValueError: scores went wrong" in home
    verify = Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=False)
    n = verify.count()
    assert re.search(rf"<td>verify</td><td class=\"num\">0</td><td class=\"num\">{n}</td><td class=\"num\">{n}</td>"
                     rf"\s*<td class=\"num\">{3 * n} / {3 * n}</td>", home)
    for section in ("organiser:annotation", "organiser:submissions", "organiser:settings", "organiser:teams",
                    "organiser:release"):
        assert reverse(section) in home

    ann = client.get(reverse("organiser:annotation"), q).content.decode()
    assert 'id="kinds"' in ann and 'id="annotators"' in ann and "Fleiss" in ann and 'id="submission-cost"' in ann
    assert "median seconds" in ann and "agreement with final label" in ann and 'id="stalled"' in ann
    assert f"{3 * n} / {3 * n}" in ann
    # the agreement table names each relation ("P17 country") and lists the most items first (review defect 13)
    from unpooled.service.annotation.status import verification_agreement
    from unpooled.service.corpora.names import predicate_order, relation_names

    names, by_rel = relation_names(corpus), verification_agreement(corpus)["by_relation"]
    assert by_rel and all(d["name"] == names.get(g, "") for g, d in by_rel.items())
    keys = [(-d["items"], predicate_order(g)) for g, d in by_rel.items()]
    assert keys == sorted(keys)
    g, d = next(iter(by_rel.items()))
    assert f"<td><code>{g}</code> {names[g]}</td>" in ann
    for a in Annotator.objects.filter(backend="simulated"):
        assert f"simulated:{a.external_id}" in ann
    spent = sum(ans.cost_cents for ans in Answer.objects.filter(task__corpus=corpus))
    assert f"would cost\n<strong>${spent / 100:,.2f}</strong>" in ann

    subs = client.get(reverse("organiser:submissions"), q).content.decode()
    assert f'id="sub-{sub.pk}"' in subs and "ValueError: scores went wrong" in subs and 'class="retry"' in subs

    teams = client.get(reverse("organiser:teams")).content.decode()
    assert 'id="teams"' in teams and "team-a" in teams

    # the status numbers behind the pages
    rows = {r["kind"]: r for r in console.overview(corpus)["kinds"]}
    assert rows["verify"]["answers_needed"] == rows["verify"]["answers_received"] == 3 * n
    assert rows["entities"]["items"] == 1 and rows["entities"]["complete"] == 1
    from unpooled.service.annotation.status import annotator_table

    table = annotator_table(corpus)
    assert all(r["median_seconds"] is not None and r["median_seconds"] > 0 for r in table if r["answers"])
    assert all(r["agreement_with_label"] is not None for r in table if r["answers"])


def test_console_without_corpus(client, db):
    _login(client, "boss", staff=True)
    r = client.get(reverse("organiser:home"))
    assert r.status_code == 200 and "No corpus yet" in r.content.decode()
    assert client.get(reverse("organiser:teams")).status_code == 200
    assert client.get(reverse("organiser:release")).status_code == 404


# ---------------------------------------------------------------------------- settings

def _settings_post(corpus, **changes) -> dict:
    data = {k: ("" if v is None else v) for k, v in console.current_settings(corpus).items()}
    data.update({k: ("" if v is None else v) for k, v in changes.items()})
    data["corpus"] = corpus.name
    return data


def test_settings_form_saves_valid_settings(client, world):
    corpus, _ = world
    _login(client, "boss", staff=True)
    url = reverse("organiser:settings") + f"?corpus={corpus.name}"
    r = client.post(url, _settings_post(corpus, backend="inhouse", answers_per_item=5, reward_verify_cents=7,
                                        reward_clusters_cents=150, budget_cents=100000, submission_budget_cents=2000, target_halfwidth=0.03,
                                        min_draws=30, max_draws=300, exhaustive_documents=2,
                                        levels=" relation , instance "))
    assert r.status_code == 302 and r["Location"] == url
    st = AnnotationSettings.objects.get(corpus=corpus)
    assert (st.backend, st.answers_per_item, st.reward_verify_cents, st.budget_cents, st.submission_budget_cents,
            st.target_halfwidth, st.min_draws, st.max_draws, st.exhaustive_documents, st.levels) == \
        ("inhouse", 5, 7, 100000, 2000, 0.03, 30, 300, 2, "relation,instance")
    assert st.reward_clusters_cents == 150  # the cross-document clustering task's reward, like the others
    page = client.get(url).content.decode()
    assert "annotation settings of console saved" in page
    # empty budgets: no cap
    assert client.post(url, _settings_post(corpus, budget_cents=None, submission_budget_cents=None)).status_code == 302
    st.refresh_from_db()
    assert st.budget_cents is None and st.submission_budget_cents is None


def _field_error(html: str, field: str) -> str:
    m = re.search(rf'<div class="field" id="field-{field}">(.*?)</div>', html, re.S)
    assert m, field
    errs = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', m.group(1), re.S)
    return " ".join(re.sub(r"<[^>]+>", "", e) for e in errs)


def test_settings_form_shows_each_problem_at_its_field(client, world):
    corpus, _ = world
    _login(client, "boss", staff=True)
    url = reverse("organiser:settings") + f"?corpus={corpus.name}"
    before = console.current_settings(corpus)
    r = client.post(url, _settings_post(corpus, backend="mturk", answers_per_item=0, reward_verify_cents=0,
                                        reward_clusters_cents=0,
                                        budget_cents=1000, submission_budget_cents=5000, control_share=1.5,
                                        target_halfwidth=0, min_draws=50, max_draws=10, exhaustive_documents=99,
                                        levels="instance,bogus", lease_seconds=5))
    assert r.status_code == 400
    html = r.content.decode()
    assert _field_error(html, "answers_per_item") == "expected an integer from 1 to 20, got 0"
    assert _field_error(html, "reward_verify_cents") == "Mechanical Turk pays at least 1 cent per assignment"
    assert _field_error(html, "reward_clusters_cents") == "Mechanical Turk pays at least 1 cent per assignment"
    assert _field_error(html, "submission_budget_cents") == \
        "5000 cents per submission exceeds the corpus budget of 1000 cents"
    assert _field_error(html, "control_share") == "expected a share in [0, 1), got 1.5"
    assert _field_error(html, "target_halfwidth") == "expected a half-width in (0, 0.5], got 0.0"
    assert _field_error(html, "max_draws") == "10 is fewer than the fewest draws per level (50)"
    assert _field_error(html, "exhaustive_documents") == ""  # more than the corpus has: the lifecycle takes all
    assert _field_error(html, "levels") == \
        "expected some of instance, relation, entity (comma-separated), got bogus"
    assert _field_error(html, "lease_seconds") == "expected at least 60 seconds, got 5"
    assert _field_error(html, "backend") == ""  # valid fields carry no error
    # Mechanical Turk without a corpus budget is refused (security review N7)
    r = client.post(url, _settings_post(corpus, backend="mturk", budget_cents=""))
    assert r.status_code == 400 and _field_error(r.content.decode(), "budget_cents") == \
        "Mechanical Turk spends money: give the corpus a budget (cents) before choosing it"
    assert console.current_settings(corpus) == before  # nothing saved

    # type errors come from the form fields themselves; the rules still check the fields that parsed
    r = client.post(url, _settings_post(corpus, answers_per_item="three", budget_cents=-5, backend="carrier-pigeon",
                                        levels="entity,entity", min_draws=""))
    html = r.content.decode()
    assert r.status_code == 400
    assert _field_error(html, "answers_per_item") == "Enter a whole number."
    assert _field_error(html, "budget_cents") == "Ensure this value is greater than or equal to 0."
    assert _field_error(html, "backend").startswith("Select a valid choice. carrier-pigeon is not one of")
    assert _field_error(html, "min_draws") == "This field is required."
    assert _field_error(html, "levels") == "a level is listed twice: &#x27;entity,entity&#x27;"
    assert console.current_settings(corpus) == before


def test_check_settings_collects_every_problem(world):
    corpus, _ = world
    values = console.current_settings(corpus)
    values.update(answers_per_item=0, min_draws=5, max_draws=1, levels="", aggregation="mode")
    with pytest.raises(console.SettingsError) as e:
        console.check_settings(corpus, values)
    assert e.value.errors == {
        "answers_per_item": "expected an integer from 1 to 20, got 0",
        "aggregation": "expected majority or dawid-skene, got 'mode'",
        "max_draws": "1 is fewer than the fewest draws per level (5)",
        "levels": "at least one of instance, relation, entity",
    }
    del values["backend"]
    with pytest.raises(console.SettingsError) as e:
        console.check_settings(corpus, values)
    assert e.value.errors["backend"] == "required"
    # the simulated crowd needs a gold layer
    ok = console.current_settings(corpus)
    assert console.check_settings(corpus, ok)["backend"] == "simulated"
    corpus.n_gold_relations = 0
    with pytest.raises(console.SettingsError) as e:
        console.check_settings(corpus, ok)
    assert e.value.errors == {"backend": "the simulated crowd answers from the gold layer, and corpus console has none"}
    assert console.check_settings(corpus, {**ok, "backend": "inhouse"})["backend"] == "inhouse"


def test_rewards_and_budgets_have_the_same_bounds_on_every_database(world):
    """An organiser walk: 99,999,999,999 cents an answer was stored on SQLite (PostgreSQL's integer field refused
    it): rewards are bounded at $1,000 an answer and budgets at the fields' common range, at the field."""
    corpus, _ = world
    ok = {**console.current_settings(corpus), "backend": "inhouse"}
    with pytest.raises(console.SettingsError) as e:
        console.check_settings(corpus, {**ok, "reward_verify_cents": 99_999_999_999, "budget_cents": 2**31})
    assert e.value.errors == {
        "reward_verify_cents": "expected a number of cents from 0 to 100,000, got 99999999999",
        "budget_cents": "expected a number of cents from 0 to 2,147,483,647 or nothing (no cap), got 2147483648",
    }
    top = {**ok, "reward_verify_cents": console.MAX_REWARD_CENTS, "budget_cents": console.MAX_BUDGET_CENTS}
    assert console.check_settings(corpus, top)["reward_verify_cents"] == 100_000


# ---------------------------------------------------------------------------- lifecycle

def test_retry_a_failed_submission(world):
    corpus, sub = world
    set_status(sub, Submission.Status.FAILED, failed_stage="sampling", error="RuntimeError: database was locked")
    client = Client(enforce_csrf_checks=True)
    _login(client, "boss", staff=True)
    url = reverse("organiser:submissions") + f"?corpus={corpus.name}"
    page = client.get(url)
    html = page.content.decode()
    assert "RuntimeError: database was locked" in html and "failed</span> at sampling" in html
    retry_url = reverse("organiser:retry", args=[sub.pk])
    assert f'action="{retry_url}"' in html
    # POST only, with the CSRF token
    assert client.get(retry_url).status_code == 405
    assert client.post(retry_url).status_code == 403
    sub.refresh_from_db()
    assert sub.status == Submission.Status.FAILED
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    r = client.post(retry_url, {"csrfmiddlewaretoken": token})
    assert r.status_code == 302 and r["Location"] == url
    sub.refresh_from_db()
    assert (sub.status, sub.failed_stage, sub.error) == (Submission.Status.SAMPLING, "", "")
    after = client.get(url).content.decode()
    assert f"submission {sub.pk} (team-a/run-1) resumes at stage sampling" in after
    assert 'class="retry"' not in after
    # retrying a submission that has not failed changes nothing and says why
    r = client.post(retry_url, {"csrfmiddlewaretoken": token}, follow=True)
    assert (f"submission {sub.pk} has not failed (it is sampling instances); only a failed submission can be "
            "retried") in r.content.decode()
    sub.refresh_from_db()
    assert sub.status == Submission.Status.SAMPLING


def test_retry_enqueues_the_lifecycle(world, django_capture_on_commit_callbacks):
    corpus, sub = world
    boss = _user("boss", staff=True)
    set_status(sub, Submission.Status.FAILED, failed_stage="annotating", error="x")
    with django_capture_on_commit_callbacks() as callbacks:
        assert console.do_retry(boss, sub) == Submission.Status.ANNOTATING
    assert len(callbacks) == 1  # advance_submission is enqueued once the retry commits


# ---------------------------------------------------------------------------- quotas

def test_quotas_form(client, world):
    corpus, sub = world
    team = sub.team
    _login(client, "boss", staff=True)
    url = reverse("organiser:team_quota", args=[team.pk])
    p = f"t{team.pk}-"
    r = client.post(url, {p + "per_day": "3", p + "total": ""})
    assert r.status_code == 302 and r["Location"] == reverse("organiser:teams")
    team.refresh_from_db()
    assert (team.quota_per_day, team.quota_total) == (3, None)
    page = client.get(reverse("organiser:teams")).content.decode()
    row = re.search(rf'<tr id="team-{team.pk}">(.*?)</tr>', page, re.S).group(1)
    assert '<td class="num">1 / 3</td>' in row  # one submission in the last 24 hours, of 3
    assert "quotas of team team-a saved" in page
    r = client.post(url, {p + "per_day": "", p + "total": "12"})
    team.refresh_from_db()
    assert (team.quota_per_day, team.quota_total) == (None, 12)
    # invalid values: shown at the team's row, nothing saved
    for bad, msg in (("-1", "Ensure this value is greater than or equal to 0."), ("many", "Enter a whole number.")):
        r = client.post(url, {p + "per_day": bad, p + "total": "12"})
        assert r.status_code == 400
        row = re.search(rf'<tr id="team-{team.pk}">(.*?)</tr>', r.content.decode(), re.S).group(1)
        assert msg in row and f'value="{bad}"' in row
        team.refresh_from_db()
        assert (team.quota_per_day, team.quota_total) == (None, 12)


# ---------------------------------------------------------------------------- alerts

def test_stalled_task_alerts_from_constructed_data(world):
    corpus, sub = world
    now = timezone.now()
    tasks = list(Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=False).order_by("id"))
    assert len(tasks) >= 3
    # task 0: leased and given up three times (two marked expired, one lease past its expiry)
    anns = [Annotator.objects.create(backend="inhouse", external_id=f"w{i}") for i in range(4)]
    for i, a in enumerate(anns[:3]):
        Assignment.objects.create(task=tasks[0], annotator=a, token=f"tok-{i}", leased=now - timedelta(hours=2),
                                  expires=now - timedelta(hours=1),
                                  status=Assignment.Status.EXPIRED if i < 2 else Assignment.Status.LEASED)
    # task 1 also has two expirations only: not stalled by expiry
    for i, a in enumerate(anns[:2]):
        Assignment.objects.create(task=tasks[1], annotator=a, token=f"tok-b{i}", leased=now - timedelta(hours=2),
                                  expires=now - timedelta(hours=1), status=Assignment.Status.EXPIRED)
    # every task was created two days ago except task 2; task 2 is fresh
    Task.objects.filter(corpus=corpus).exclude(pk=tasks[2].pk).update(created=now - timedelta(days=2))
    # a lease in progress does not count as expired
    Assignment.objects.create(task=tasks[2], annotator=anns[3], token="tok-live", leased=now,
                              expires=now + timedelta(minutes=10))

    st = console.stalled_tasks(corpus, now=now)
    assert [r["task"] for r in st["expired"]] == [tasks[0].pk] and st["expired"][0]["expired"] == 3
    unanswered = {r["task"] for r in st["unanswered"]}
    assert tasks[2].pk not in unanswered and tasks[0].pk in unanswered
    assert st["n_unanswered"] == len(tasks) - 1

    # submissions: ours has annotated for two hours without an answer; one failed; one annotating but fresh
    set_status(sub, Submission.Status.ANNOTATING)
    Submission.objects.filter(pk=sub.pk).update(status_changed=now - timedelta(hours=2))
    failed = _other_submission(corpus, status=Submission.Status.FAILED, run="bad", failed_stage="sampling",
                               error="Traceback ...\nKeyError: 'per:spouse'")
    _other_submission(corpus, status=Submission.Status.ANNOTATING, run="fresh")
    # the corpus budget is spent
    st_ = actions.settings_for(corpus)
    st_.budget_cents = 10
    st_.save()

    got = console.alerts(corpus, now=now)
    by_code = {a.code: a for a in got}
    assert [a.level for a in got] == sorted((a.level for a in got), key=lambda lv: lv != "error")
    assert set(by_code) == {"failed_submission", "stuck_submission", "expired_repeatedly", "open_unanswered",
                            "budget_spent"}
    assert by_code["failed_submission"].message == \
        f"submission {failed.pk} (team-b/bad) failed at stage sampling: KeyError: 'per:spouse'"
    assert by_code["stuck_submission"].submission == sub.pk
    assert "waits for open verification tasks but got no answer in the last 60 minutes" in \
        by_code["stuck_submission"].message
    assert by_code["expired_repeatedly"].message.startswith("1 open task(s) leased and expired 3 times or more")
    assert by_code["open_unanswered"].message == \
        f"{len(tasks) - 1} task(s) open for more than 24 hours with no answer"
    assert by_code["budget_spent"].level == "error"

    # an answer in the last hour un-sticks the submission
    lease = leasing.lease_next(anns[3], kind=Kind.VERIFY, corpus=corpus)
    actions.submit_answer(lease, {"relation": "none", "subject_ok": True, "object_ok": True, "link_ok": None})
    assert "stuck_submission" not in {a.code for a in console.alerts(corpus)}

    # a submission whose labels are all in but that stays in annotating is stuck for another reason
    Task.objects.filter(requests__submission=sub).update(status=Task.Status.COMPLETE)
    later = timezone.now() + timedelta(hours=3)
    stuck = [a for a in console.alerts(corpus, now=later) if a.code == "stuck_submission"]
    assert len(stuck) == 2 and any("has all its labels but has not moved on to scoring" in a.message for a in stuck)


def test_alerts_show_at_the_top_of_every_corpus_page(client, world):
    corpus, sub = world
    set_status(sub, Submission.Status.FAILED, failed_stage="scoring", error="ZeroDivisionError: division by zero")
    _login(client, "boss", staff=True)
    for name in ("organiser:home", "organiser:annotation", "organiser:submissions", "organiser:settings"):
        html = client.get(reverse(name), {"corpus": corpus.name}).content.decode()
        top = html.index('id="alerts"')
        assert 'data-code="failed_submission"' in html[top:], name
        assert top < html.index("<h2>"), name


def test_relation_groups_are_checked_against_the_schema_and_saved(client, world):
    """An organiser groups relations the crowd judges alike: a group shares one stratum of the crowd model; a
    relation the schema does not hold, or one in two groups, is refused at the field, naming it."""
    from unpooled.service.evaluations import rates

    corpus, _ = world
    _login(client, "boss", staff=True)
    url = reverse("organiser:settings") + f"?corpus={corpus.name}"
    names = sorted(r.name for r in corpus.schema.schema().canonical_relations)
    a, b, c = names[:3]
    r = client.post(url, _settings_post(corpus, relation_groups=f"alike: {a}, {b}x"))
    assert r.status_code == 400
    said = html.unescape(_field_error(r.content.decode(), "relation_groups"))
    assert f"'{b}x' is not a relation of the schema (did you mean {b!r}?)" in said
    r = client.post(url, _settings_post(corpus, relation_groups=f"alike: {a}, {b}\nother: {b} {c}"))
    assert r.status_code == 400
    assert "already in group 'alike'" in html.unescape(_field_error(r.content.decode(), "relation_groups"))
    assert AnnotationSettings.objects.get(corpus=corpus).relation_groups == ""
    before = rates.relation_strata(corpus)
    assert len(set(before.values())) == len(names)
    r = client.post(url, _settings_post(corpus, relation_groups=f"alike: {a}, {b}"))
    assert r.status_code == 302
    strata = rates.relation_strata(corpus)
    assert strata[a] == strata[b] != strata[c] and len(set(strata.values())) == len(names) - 1
    assert rates.answers_fp(corpus)[-2] == ((a, "alike"), (b, "alike"))  # every fit keyed on it is redone


def test_items_no_active_annotator_can_answer_are_named(world):
    """In-house, an item that asks for more answers than the annotators who work on the corpus can give (each has
    answered it) waits for a new annotator: the console says how many, and the simulated crowd's closed pool uses
    the same rule (leasing.unreachable_items)."""
    from unpooled.service.annotation import leasing

    corpus, _ = world
    st = actions.settings_for(corpus)
    st.backend, st.control_share = "inhouse", 0.0
    st.save()
    tasks = list(Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=False).order_by("id"))
    Task.objects.filter(pk=tasks[0].pk).update(answers_needed=3)
    Task.objects.exclude(pk=tasks[0].pk).filter(corpus=corpus).update(answers_needed=1)
    yes = {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None}
    anns = [Annotator.objects.create(backend="inhouse", external_id=f"in{i}") for i in range(2)]
    for a in anns:  # both answer the first item; it still needs a third answer
        lease = leasing._try_lease(tasks[0].pk, a, timezone.now())
        actions.submit_answer(lease, yes)
    assert leasing.active_annotators(corpus, "inhouse") == [a.pk for a in anns]
    assert list(leasing.unreachable_items(corpus, [a.pk for a in anns])) == [Task.objects.get(pk=tasks[0].pk)]
    got = {a.code: a for a in console.alerts(corpus)}["waiting_for_annotators"]
    assert got.message.startswith("1 open item(s) ask for more answers than the 2 unblocked in-house annotator(s)")
    # a simulated crowd's pool is closed (it completes such items itself), an MTurk pool open: no alert there
    for backend in ("simulated", "mturk"):
        st.backend = backend
        st.save()
        assert "waiting_for_annotators" not in {a.code for a in console.alerts(corpus)}, backend
    st.backend = "inhouse"
    st.save()
    # a third annotator joins and answers: the item completes, the alert goes
    third = Annotator.objects.create(backend="inhouse", external_id="in2")
    actions.submit_answer(leasing._try_lease(tasks[0].pk, third, timezone.now()), yes)
    assert Task.objects.get(pk=tasks[0].pk).status == Task.Status.COMPLETE
    assert "waiting_for_annotators" not in {a.code for a in console.alerts(corpus)}


def test_a_quota_beyond_the_database_integer_is_refused_at_its_field(client, world):
    """A quota of 10**14 submissions a day was taken by the form (no upper bound): SQLite stored it, and
    PostgreSQL's integer column refused it, a 500.  It is now refused at its field (2,147,483,647 at most), on
    both engines, and nothing is saved."""
    corpus, sub = world
    team = sub.team
    _login(client, "boss", staff=True)
    p = f"t{team.pk}-"
    r = client.post(reverse("organiser:team_quota", args=[team.pk]), {p + "per_day": str(10 ** 14), p + "total": "7"})
    assert r.status_code == 400 and "Ensure this value is less than or equal to 2147483647." in r.content.decode()
    team.refresh_from_db()
    assert (team.quota_per_day, team.quota_total) == (None, None)


def test_relation_groups_are_bounded_and_their_errors_short(client, world):
    """The relation groups' text had no bound, and an unknown relation or group name came back whole in the error,
    twice (a 20,000-character word made a 40,000-character message beside the field); now the text has a bound
    (20,000 characters) and an error quotes at most 60 characters of a name."""
    corpus, _ = world
    _login(client, "boss", staff=True)
    url = reverse("organiser:settings") + f"?corpus={corpus.name}"
    before = console.current_settings(corpus)
    r = client.post(url, _settings_post(corpus, relation_groups="hard: " + "x" * 19_000))
    said = " ".join(re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', r.content.decode(), re.S))
    assert r.status_code == 400 and "is not a relation of the schema" in said and len(said) < 400, said[:500]
    r = client.post(url, _settings_post(corpus, relation_groups="a: P17;" * 4_000))
    assert r.status_code == 400 and "relation groups: 28,000 characters; at most 20,000" in r.content.decode()
    assert console.current_settings(corpus) == before
