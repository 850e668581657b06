"""The label pool against a motivated team (security review 2026-11-26, N17): an annotator cannot walk the queue to
chosen items with Skip, nor know which item comes next."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from unpooled.service.annotation import actions, leasing
from unpooled.service.annotation.models import Annotator, Assignment, Kind, Task
from unpooled.service.submissions.models import RelationInstance

from ..conftest import load_redocred_subset

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(shared_data, tmp_path):
    """A corpus with 40 verification items waiting, all asked for at once (one priority), no controls."""
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 6, "pool", team="TeamA", run="a1")
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:40]
    actions.request_verification(sub, ids)
    assert Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=False).count() == 40
    User.objects.create_user("walker", password="pw-walker-123")
    return corpus


def _lease_token(client) -> str:
    r = client.get(reverse("annotation:next", args=["verify"]))
    assert r.status_code == 302, r.status_code
    return r["Location"].rstrip("/").split("/")[-1]


@override_settings(SKIPS_PER_HOUR=5)
def test_skip_walks_at_most_the_hourly_limit(client, queue):
    """The review walked 74 items with Skip to reach a rival's.  Now the 6th skip in an hour is refused (429, the page
    says why and until when), the lease stays the annotator's, and an hour after the first skip one more is taken."""
    assert client.login(username="walker", password="pw-walker-123")
    for _ in range(5):
        token = _lease_token(client)
        r = client.post(reverse("annotation:skip", args=[token]))
        assert r.status_code == 302 and Assignment.objects.get(token=token).status == Assignment.Status.SKIPPED
    token = _lease_token(client)
    r = client.post(reverse("annotation:skip", args=[token]))
    page = r.content.decode()
    assert r.status_code == 429 and 'id="skip-refused"' in page and "skipped 5 items in the last hour" in page
    assert Assignment.objects.get(token=token).status == Assignment.Status.LEASED
    assert _lease_token(client) == token  # the next page is the same item: the queue did not move
    # the skips of an hour ago no longer count
    Assignment.objects.filter(status=Assignment.Status.SKIPPED).update(expires=timezone.now() - timedelta(minutes=61))
    r = client.post(reverse("annotation:skip", args=[token]))
    assert r.status_code == 302 and Assignment.objects.get(token=token).status == Assignment.Status.SKIPPED
    # a skip of a lease that is no longer live changes nothing and is not counted
    assert client.post(reverse("annotation:skip", args=[token])).status_code == 302
    assert Assignment.objects.filter(status=Assignment.Status.SKIPPED, expires__gt=timezone.now() - timedelta(hours=1)
                                     ).count() == 1


def test_the_next_item_cannot_be_predicted(queue):
    """Everyone used to get the oldest item first, so two accounts of one team met on the same items in the same
    order.  Now ten people starting together begin on different items; a simulated worker (seeded runs) still
    takes the oldest."""
    firsts = []
    for i in range(10):
        ann = Annotator.objects.create(backend="inhouse", external_id=f"person{i}")
        lease = leasing.lease_next(ann, corpus=queue)
        firsts.append(lease.task_id)
        leasing.release(lease)
    assert len(set(firsts)) >= 3, firsts
    oldest = Task.objects.filter(corpus=queue, kind=Kind.VERIFY).order_by("priority", "id").first()
    sim = Annotator.objects.create(backend="simulated", external_id="sim")
    assert leasing.lease_next(sim, corpus=queue).task_id == oldest.pk


def test_an_invited_annotator_declares_their_teams(client, queue):
    """The review's ``alicealt``, an invited annotator who is TeamA's member in real life, labelled TeamA's item.
    Sign-up now asks every annotator for the teams they belong to or work with; a look-alike spelling of a team is
    that team; an unknown name is refused by name; the declared team's items are never offered."""
    from django.contrib.auth.models import User as Users

    from unpooled.service.accounts.actions import do_make_invite
    from unpooled.service.accounts.models import Profile

    org = Users.objects.create_user("org", password="pw-org-12345", is_staff=True)
    signup = reverse("accounts:signup")
    form = {"username": "alicealt", "password": "a-long-password-9", "role": "annotator",
            "invite_code": do_make_invite(org, note="alt").code}
    for ties, said in [("", "name the teams you belong to or work with"), ("TeamZ", "no team &#x27;TeamZ&#x27;")]:
        r = client.post(signup, {**form, "ties": ties})
        assert r.status_code == 200 and said in r.content.decode(), ties
        assert not Users.objects.filter(username="alicealt").exists()
    r = client.post(signup, {**form, "ties": " ｔｅａｍａ "})  # full-width, lower case: TeamA
    assert r.status_code == 302
    prof = Profile.objects.get(user__username="alicealt")
    assert prof.invited and [t.name for t in prof.conflicts.all()] == ["TeamA"]
    ann = leasing.annotator_for_user(prof.user)
    assert leasing.lease_next(ann, corpus=queue) is None  # every item waiting is TeamA's
    assert not leasing.leasable(ann).exists()


def test_gold_controls_come_from_a_layer_annotators_cannot_read(client, queue):
    """Gold controls are drawn from the gold layer, which document pages showed everyone: an annotator could look
    their answers up and pass every control.  The console says so while the layer is public; made private, the
    gold layer (its mentions, relations, the schema's examples and the sample file) is shown to organisers only."""
    from unpooled.service.corpora.models import Document
    from unpooled.service.organiser import console

    st = actions.settings_for(queue)
    st.backend, st.control_share = "inhouse", 0.1
    st.save()
    assert "gold_controls_readable" in {a.code for a in console.alerts(queue)}
    doc = Document.objects.filter(corpus=queue, gold_relations__isnull=False).first()
    page = reverse("web:document", args=[queue.name, doc.pk])
    assert "Gold relations" in client.get(page).content.decode()
    st.gold_public = False
    st.save()
    assert "gold_controls_readable" not in {a.code for a in console.alerts(queue)}
    assert client.login(username="walker", password="pw-walker-123")  # an annotator
    for who in (client, Client()):
        html = who.get(page).content.decode()
        assert "Gold relations" not in html and 'id="gold-hidden"' in html and 'data-layer="gold"' not in html
        assert who.get(reverse("web:sample", args=[queue.name])).content == b""
        assert 'class="ctx"' not in who.get(reverse("web:schema", args=[queue.name])).content.decode()
    org = Client()
    org.force_login(User.objects.create_user("org", password="pw-org-12345", is_staff=True))
    assert "Gold relations" in org.get(page).content.decode()
    assert org.get(reverse("web:sample", args=[queue.name])).content.count(b"\n") >= 1
    assert 'class="ctx"' in org.get(reverse("web:schema", args=[queue.name])).content.decode()
