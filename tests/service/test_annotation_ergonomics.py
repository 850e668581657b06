"""Annotation ergonomics on the server: undo of one's own last answer (and every undo that must be refused),
"n done · m left for you", the queue's counts for you, and the empty queue's reasons."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from unpooled.service.annotation import actions, leasing
from unpooled.service.annotation.controls import create_verify_controls
from unpooled.service.annotation.models import Annotator, Answer, Assignment, Kind, Task
from unpooled.service.submissions.models import RelationInstance

from ..conftest import load_redocred_subset

pytestmark = pytest.mark.django_db

HOLDS = {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None}
NONE = {"relation": "none", "subject_ok": True, "object_ok": False, "link_ok": None}


@pytest.fixture
def setup(shared_data, tmp_path):
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 3, "ergo", team="zz-team", run="zz-run")
    st = actions.settings_for(corpus)
    st.answers_per_item = 2     # one answer leaves the item open: it may be undone
    st.save()
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:5]
    actions.request_verification(sub, ids)
    User.objects.create_user("ann", password="pw-ann-123")
    User.objects.create_user("eve", password="pw-eve-123")
    return corpus


def _token(resp) -> str:
    return resp["Location"].rstrip("/").split("/")[-1]


def _answer(client, value=HOLDS) -> str:
    """Lease the next verification item, answer it; the lease's token."""
    r = client.get(reverse("annotation:next", args=["verify"]))
    token = _token(r)
    ok = client.post(r["Location"], {"answer": json.dumps(value), "seconds": "2.5"})
    assert ok.status_code == 302, ok.content.decode()[:400]
    return token


def test_undo_reopens_the_last_answer_with_its_value(client, setup):
    assert client.login(username="ann", password="pw-ann-123")
    token = _answer(client, NONE)
    page = client.get(reverse("annotation:next", args=["verify"]))   # the next item offers the undo
    html = client.get(page["Location"]).content.decode()
    assert f'action="{reverse("annotation:undo", args=[token])}"' in html and 'id="undo"' in html
    assert "1</strong> done · <strong>" in html

    r = client.post(reverse("annotation:undo", args=[token]))
    assert r.status_code == 302 and r["Location"] == reverse("annotation:task", args=[token])
    assert not Answer.objects.filter(assignment__token=token).exists()
    lease = Assignment.objects.get(token=token)
    assert lease.status == Assignment.Status.LEASED
    html = client.get(r["Location"]).content.decode()
    assert 'id="undone"' in html
    restored = html.split('id="previous-answer" type="application/json">')[1].split("</script>")[0]
    assert json.loads(restored) == NONE     # the withdrawn answer comes back, to be corrected
    assert 'id="undo"' not in html          # nothing more to undo
    ok = client.post(r["Location"], {"answer": json.dumps(HOLDS)})  # answered again, differently
    assert ok.status_code == 302
    assert Answer.objects.get(assignment__token=token).value == HOLDS


def test_undo_of_another_users_answer_is_a_404(client, setup):
    assert client.login(username="ann", password="pw-ann-123")
    token = _answer(client)
    client.logout()
    assert client.login(username="eve", password="pw-eve-123")
    assert client.post(reverse("annotation:undo", args=[token])).status_code == 404
    assert client.post(reverse("annotation:undo", args=["forged-token"])).status_code == 404
    client.logout()
    r = client.post(reverse("annotation:undo", args=[token]))       # signed out: to the sign-in page
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]
    assert Answer.objects.filter(assignment__token=token).exists()


def test_undo_needs_a_post_with_csrf(setup):
    from django.test import Client

    c = Client(enforce_csrf_checks=True)
    assert c.login(username="ann", password="pw-ann-123")
    ann = leasing.annotator_for_user(User.objects.get(username="ann"))
    lease = leasing.lease_next(ann, kind=Kind.VERIFY)
    actions.submit_answer(lease, HOLDS)
    assert c.get(reverse("annotation:undo", args=[lease.token])).status_code == 405
    assert c.post(reverse("annotation:undo", args=[lease.token])).status_code == 403   # no CSRF token
    assert Answer.objects.filter(assignment=lease).exists()


def test_only_the_last_answer_can_be_undone(setup):
    ann = leasing.annotator_for_user(User.objects.get(username="ann"))
    first = leasing.lease_next(ann, kind=Kind.VERIFY)
    actions.submit_answer(first, HOLDS)
    second = leasing.lease_next(ann, kind=Kind.VERIFY)
    actions.submit_answer(second, HOLDS)
    with pytest.raises(actions.UndoRefused, match="only your last answer"):
        actions.undo_answer(first)
    assert actions.undo_answer(second) == HOLDS
    with pytest.raises(actions.UndoRefused, match="no answer of yours"):
        actions.undo_answer(second)              # twice: nothing left to undo


def test_undo_is_refused_after_the_lease_expired_or_once_the_item_is_decided(setup):
    ann = leasing.annotator_for_user(User.objects.get(username="ann"))
    lease = leasing.lease_next(ann, kind=Kind.VERIFY)
    actions.submit_answer(lease, HOLDS)
    with pytest.raises(actions.UndoRefused, match="lease expired"):
        actions.undo_answer(lease, now=lease.expires + timedelta(seconds=1))
    # another annotator's answer completes the item (2 needed): the label is written, the answer stays
    other = Annotator.objects.create(backend="inhouse", external_id="other")
    o = leasing._try_lease(lease.task_id, other, timezone.now())
    actions.submit_answer(o, HOLDS)
    assert Task.objects.get(pk=lease.task_id).status == Task.Status.COMPLETE
    with pytest.raises(actions.UndoRefused, match="decided"):
        actions.undo_answer(lease)
    assert Answer.objects.filter(assignment=lease).exists()


def test_undo_is_refused_for_mturk_and_blocked_annotators(setup):
    worker = Annotator.objects.create(backend="mturk", external_id="W1")
    lease = leasing._try_lease(Task.objects.filter(kind=Kind.VERIFY).first().pk, worker, timezone.now())
    actions.submit_answer(lease, HOLDS)
    with pytest.raises(actions.UndoRefused, match="in-house"):
        actions.undo_answer(lease)
    ann = leasing.annotator_for_user(User.objects.get(username="ann"))
    mine = leasing.lease_next(ann, kind=Kind.VERIFY)
    actions.submit_answer(mine, HOLDS)
    actions.block_annotator(ann, reason="test")
    with pytest.raises(actions.UndoRefused, match="blocked"):
        actions.undo_answer(mine)


def test_undo_of_a_control_keeps_its_first_answer_s_score(setup):
    """Security review N3: an undo took a control's score back, so an annotator could answer, undo a wrong answer
    and answer right: (0,0) -> (1,0) -> (0,0) -> (1,1), and controls never blocked them.  Now the first answer is
    the one scored; the undo itself acts as on any item (the answer is withdrawn and can be given again)."""
    corpus = setup
    create_verify_controls(corpus, 2, rng=0)
    ann = leasing.annotator_for_user(User.objects.get(username="ann"))
    ctrl = Task.objects.filter(is_control=True).order_by("pk").first()
    lease = leasing._try_lease(ctrl.pk, ann, timezone.now())
    right, wrong = (HOLDS, NONE) if ctrl.control_answer["correct"] else (NONE, HOLDS)
    actions.submit_answer(lease, wrong)
    ann.refresh_from_db()
    assert (ann.controls_answered, ann.controls_correct) == (1, 0)
    assert actions.undo_answer(lease) is not None  # withdrawn, as any item's answer
    ann.refresh_from_db()
    assert (ann.controls_answered, ann.controls_correct) == (1, 0)
    lease.refresh_from_db()
    actions.submit_answer(lease, right)
    ann.refresh_from_db()
    assert (ann.controls_answered, ann.controls_correct) == (1, 0)  # the answer given again is not scored


def test_an_undo_refused_says_why_on_the_next_page(client, setup):
    assert client.login(username="ann", password="pw-ann-123")
    token = _answer(client)
    Assignment.objects.filter(token=token).update(expires=timezone.now() - timedelta(seconds=1))
    r = client.post(reverse("annotation:undo", args=[token]))
    assert r.status_code == 302 and r["Location"] == reverse("annotation:next", args=["verify"])
    nxt = client.get(r["Location"])
    html = client.get(nxt["Location"]).content.decode()
    assert 'id="undo-refused"' in html and "lease expired" in html


def test_progress_and_queue_count_what_is_left_for_you(client, setup):
    ann = leasing.annotator_for_user(User.objects.get(username="ann"))
    n = Task.objects.filter(kind=Kind.VERIFY, is_control=False).count()
    assert leasing.progress(ann, Kind.VERIFY).left == n and leasing.progress(ann, Kind.VERIFY).done == 0
    lease = leasing.lease_next(ann, kind=Kind.VERIFY)
    assert leasing.progress(ann, Kind.VERIFY).left == n   # the leased item is still left
    actions.submit_answer(lease, HOLDS)
    p = leasing.progress(ann, Kind.VERIFY)
    assert (p.done, p.left) == (1, n - 1)
    # two other annotators hold every slot of one item: it is open, but not for ann
    busy = Task.objects.filter(kind=Kind.VERIFY, is_control=False).exclude(pk=lease.task_id).first()
    for i in range(2):
        leasing._try_lease(busy.pk, Annotator.objects.create(backend="inhouse", external_id=f"x{i}"), timezone.now())
    # what others do shows when the kept count is counted again (at most leasing.LEFT_SECONDS later)
    assert leasing.progress(ann, Kind.VERIFY).left == n - 1
    from django.core.cache import cache

    cache.clear()
    assert leasing.progress(ann, Kind.VERIFY).left == n - 2
    assert client.login(username="ann", password="pw-ann-123")
    html = client.get(reverse("annotation:queue")).content.decode()
    assert f"({n - 2} for you)" in html and " open, " not in html  # one count a kind (controls in it: N3)


def test_the_own_counts_of_a_task_page_equal_the_orm_s(setup):
    """Issue 22, item 9: the counts every task page reads (answered, all but expired, live leases of open tasks)
    come from one plain query; they equal the ORM aggregate they replaced, over leases in every state (answered,
    skipped, expired, live, past their time, of a closed task), on SQLite and PostgreSQL."""
    from django.db.models import Count, Q

    ann = leasing.annotator_for_user(User.objects.get(username="ann"))
    now = timezone.now()
    tasks = list(Task.objects.filter(kind=Kind.VERIFY, is_control=False).order_by("pk"))
    assert len(tasks) >= 5
    leases = [leasing._try_lease(t.pk, ann, now) for t in tasks[:5]]
    actions.submit_answer(leases[0], HOLDS)
    Assignment.objects.filter(pk=leases[1].pk).update(status=Assignment.Status.SKIPPED)
    Assignment.objects.filter(pk=leases[2].pk).update(status=Assignment.Status.EXPIRED)
    Assignment.objects.filter(pk=leases[3].pk).update(expires=now - timedelta(seconds=5))
    Task.objects.filter(pk=tasks[4].pk).update(status=Task.Status.CANCELLED)

    def orm(at):
        return Assignment.objects.filter(annotator=ann, task__kind=Kind.VERIFY).aggregate(
            done=Count("id", filter=Q(status=Assignment.Status.SUBMITTED)),
            seen=Count("id", filter=~Q(status=Assignment.Status.EXPIRED)),
            held=Count("id", filter=Q(status=Assignment.Status.LEASED, expires__gte=at, task__status=Task.Status.OPEN)))

    for at in (now, now - timedelta(seconds=10), now + timedelta(days=2)):
        assert leasing._own_counts(ann, Kind.VERIFY, at) == orm(at), at
    assert leasing._own_counts(ann, Kind.VERIFY, now) == {"done": 1, "seen": 4, "held": 0}
    assert leasing._own_counts(ann, Kind.VERIFY, now - timedelta(seconds=10))["held"] == 1
    assert leasing._own_counts(ann, Kind.ENTITIES, now) == {"done": 0, "seen": 0, "held": 0}


def test_what_is_left_falls_by_one_after_an_item_and_after_a_control_alike(setup):
    """Security review N3: "N for you" fell by one after a real item and stayed after a gold control, which told
    5 of 5 controls apart.  Controls now count as items: the count falls by one after either."""
    corpus = setup
    create_verify_controls(corpus, 3, rng=0)
    ann = leasing.annotator_for_user(User.objects.get(username="ann"))

    def for_you() -> int:
        return leasing.count_leasable(ann, kind=Kind.VERIFY)[0]

    real = Task.objects.filter(kind=Kind.VERIFY, is_control=False).order_by("pk").first()
    ctrl = Task.objects.filter(kind=Kind.VERIFY, is_control=True).order_by("pk").first()
    start = for_you()
    assert start == Task.objects.filter(kind=Kind.VERIFY).count()
    for task, answer in ((real, HOLDS), (ctrl, HOLDS if ctrl.control_answer["correct"] else NONE)):
        before = leasing.progress(ann, Kind.VERIFY).left
        lease = leasing._try_lease(task.pk, ann, timezone.now())
        assert leasing.progress(ann, Kind.VERIFY).left == before  # a held item (or control) is still left
        actions.submit_answer(lease, answer)
        assert leasing.progress(ann, Kind.VERIFY).left == before - 1, task.is_control
    assert for_you() == start - 2


def test_empty_queue_explains_why(client, setup):
    corpus = setup
    ann_user = User.objects.get(username="ann")
    ann = leasing.annotator_for_user(ann_user)
    # answer what can be answered; two other annotators hold the rest
    tasks = list(Task.objects.filter(kind=Kind.VERIFY, is_control=False).order_by("pk"))
    actions.submit_answer(leasing._try_lease(tasks[0].pk, ann, timezone.now()), HOLDS)
    for t in tasks[1:]:
        for i in range(2):
            leasing._try_lease(t.pk, Annotator.objects.get_or_create(backend="inhouse", external_id=f"y{i}")[0],
                               timezone.now())
    assert client.login(username="ann", password="pw-ann-123")
    html = client.get(reverse("annotation:next", args=["verify"])).content.decode()
    assert 'id="empty-reasons"' in html
    assert "You answered 1 of the open items" in html
    assert f"{len(tasks) - 1} open items have all the annotators they need working on them now" in html
    assert "15 minutes" in html and "Corpus ergo is answered by a simulated crowd" in html  # the corpus's backend
    html = client.get(reverse("annotation:next", args=["entities"])).content.decode()
    assert "unpooled annotate documents" in html
    html = client.get(reverse("annotation:next", args=["relations"])).content.decode()
    assert "once its entity task has all its answers" in html
    # a member of the submitting team may not judge its instances: the page says so
    from unpooled.service.accounts.models import Profile, Role
    from unpooled.service.submissions.models import Team

    member = User.objects.create_user("member", password="a-long-password")
    Profile.objects.create(user=member, role=Role.ANNOTATOR, team=Team.objects.get(name="zz-team"), invited=True)
    client.force_login(member)
    html = client.get(reverse("annotation:next", args=["verify"])).content.decode()
    assert "about your own team&#x27;s submissions, which you may not judge" in html, html[-3000:]
    assert corpus


def test_items_left_are_counted_up_to_a_bound(setup, monkeypatch):
    ann = leasing.annotator_for_user(User.objects.get(username="ann"))
    n = Task.objects.filter(kind=Kind.VERIFY, is_control=False).count()
    monkeypatch.setattr(leasing, "LEFT_COUNTED", n - 2)
    assert leasing.count_leasable(ann, kind=Kind.VERIFY) == (n - 2, True)
    p = leasing.progress(ann, Kind.VERIFY)
    assert (p.left, p.more) == (n - 2, True)
    monkeypatch.setattr(leasing, "LEFT_COUNTED", n)
    assert leasing.count_leasable(ann, kind=Kind.VERIFY) == (n, False)


def test_an_answer_that_completed_its_item_says_it_cannot_be_undone(client, setup):
    """UX review #3: with one answer per item (or the last of k), the undo key silently did nothing.  The next page
    now says the answer was saved and why it can no longer be undone (and the key makes that note flash)."""
    Task.objects.filter(kind=Kind.VERIFY).update(answers_needed=1)
    assert client.login(username="ann", password="pw-ann-123")
    token = _answer(client, HOLDS)
    assert Assignment.objects.get(token=token).task.status == Task.Status.COMPLETE
    page = client.get(reverse("annotation:next", args=["verify"]))
    html = client.get(page["Location"]).content.decode()
    assert 'id="undo-form"' not in html
    assert 'id="saved-final"' in html and "it completed its item, so it can no longer be undone" in html


def test_with_one_answer_per_item_undo_acts_alike_for_a_control_and_an_item(client, setup):
    """Security review N3, with one answer per item: an item's answer completed it (the next page said it could no
    longer be undone) while a gold control's stayed open (the next page offered its undo), so the undo offer told
    every control apart.  A control now counts as decided whenever an item in its place would be: the same page and
    the same refusal after either."""
    corpus = setup
    st = actions.settings_for(corpus)
    st.answers_per_item = 1
    st.save()
    Task.objects.filter(kind=Kind.VERIFY).update(answers_needed=1)
    create_verify_controls(corpus, 2, rng=0)
    ann = leasing.annotator_for_user(User.objects.get(username="ann"))
    assert client.login(username="ann", password="pw-ann-123")
    pages, refusals = [], []
    for task in (Task.objects.filter(kind=Kind.VERIFY, is_control=False).order_by("pk").first(),
                 Task.objects.filter(kind=Kind.VERIFY, is_control=True).order_by("pk").first()):
        lease = leasing._try_lease(task.pk, ann, timezone.now())
        r = client.post(reverse("annotation:task", args=[lease.token]), {"answer": json.dumps(HOLDS), "seconds": "2"})
        assert r.status_code == 302
        nxt = client.get(r["Location"])
        html = client.get(nxt["Location"]).content.decode()
        pages.append(('id="undo-form"' in html, 'id="saved-final"' in html and "it completed its item" in html))
        with pytest.raises(actions.UndoRefused) as exc:
            actions.undo_answer(lease)
        refusals.append(str(exc.value))
        client.get(reverse("annotation:queue"))  # the next page's lease is let go: the control is leased next
        Assignment.objects.filter(annotator=ann, status=Assignment.Status.LEASED).delete()
    assert pages == [(False, True), (False, True)]
    assert refusals[0] == refusals[1]


def test_a_task_page_reloaded_after_its_lease_expired_renews_it_while_the_item_is_free(client, setup):
    """An annotator who left a task open past its lease and reloaded it got "This task's time ran out" (410), and
    the draft their browser kept for the lease was never shown again unless the same item came back, though an
    answer posted at that moment would have been taken (its slot was still free).  The page now renews the lease
    (same token: the draft comes back) while the item is free, and says so; once the slot went to another
    annotator it is 410 as before."""
    assert client.login(username="ann", password="pw-ann-123")
    r = client.get(reverse("annotation:next", args=["verify"]))
    token = _token(r)
    Assignment.objects.filter(token=token).update(expires=timezone.now() - timedelta(seconds=5))
    page = client.get(r["Location"])
    assert page.status_code == 200 and 'id="renewed"' in page.content.decode()
    lease = Assignment.objects.get(token=token)
    assert lease.status == Assignment.Status.LEASED and lease.expires > timezone.now()
    # expired again, and the item's slots taken by two others meanwhile: the time ran out for good
    Assignment.objects.filter(token=token).update(expires=timezone.now() - timedelta(seconds=5))
    leasing.expire_leases()
    for name in ("eve", "zed"):
        other = leasing.annotator_for_user(User.objects.get_or_create(username=name)[0])
        assert leasing._try_lease(lease.task_id, other, timezone.now()) is not None
    page = client.get(r["Location"])
    assert page.status_code == 410 and "time ran out" in page.content.decode()


def test_the_queue_counts_the_item_you_hold_as_the_task_page_does(client, setup):
    """The task page said "0 done · n left for you" (the item held among them); back on the queue, the same kind said
    "(n - 1 for you)", though pressing its number reopens the item held.  The queue now counts as the page does."""
    ann = leasing.annotator_for_user(User.objects.get(username="ann"))
    assert client.login(username="ann", password="pw-ann-123")
    r = client.get(reverse("annotation:next", args=["verify"]))
    page = client.get(r["Location"]).content.decode()
    left = leasing.progress(ann, Kind.VERIFY).left
    assert f"0</strong> done · <strong>{left}</strong> left for you" in page
    html = client.get(reverse("annotation:queue")).content.decode()
    assert f"({left} for you)" in html
