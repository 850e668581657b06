"""The document view: gold, exhaustive and verified layers over the text, overlaps included."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from unpooled.service.annotation.layers import layered_sentences

from ..conftest import load_redocred_subset


def test_segments_cut_at_every_boundary_and_keep_overlaps():
    text = "Ada Lovelace met Charles Babbage ."
    segs = layered_sentences(text, [(0, 0, len(text))], {
        "gold": [(0, 12, "gold PER"), (17, 32, "gold PER")],
        "exh": [(4, 12, "PER")],
        "ver": [(0, 3, "subject: ok", "ok")]})[0][1]
    assert "".join(s["text"] for s in segs) == text
    assert [(s["text"], s["classes"]) for s in segs] == [
        ("Ada", "gold ver-ok"), (" ", "gold"), ("Lovelace", "exh gold"), (" met ", ""), ("Charles Babbage", "gold"),
        (" .", "")]
    assert segs[0]["title"] == "gold PER; subject: ok"


@pytest.mark.django_db
def test_document_page_shows_the_layers(client, shared_data, tmp_path):
    from unpooled.service.annotation import actions
    from unpooled.service.submissions.models import RelationInstance

    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 2, "layers")
    inst = RelationInstance.objects.filter(submission=sub).order_by("pk").first()
    actions.request_verification(sub, [inst.pk])
    html = client.get(reverse("web:document", args=["layers", inst.document_id])).content.decode()
    assert 'id="doc-text"' in html and 'class="seg gold' in html
    # the exhaustive layer is the organisers' until a period is released (security review N13): its toggle too
    assert 'data-layer="exh"' not in html and 'id="exhaustive-hidden"' in html
    client.force_login(get_user_model().objects.create_user("org-layers", password="pw-org-5512", is_staff=True))
    html = client.get(reverse("web:document", args=["layers", inst.document_id])).content.decode()
    assert 'data-layer="exh"' in html and "ver-open" in html  # the item awaiting its label: the organisers' too


@pytest.mark.django_db
def test_document_page_names_every_relation(client, shared_data, tmp_path):
    """Review defect 13: gold and verified relations, and the span tooltips, say "P17 country", not "P17"."""
    from unpooled.service.annotation import actions
    from unpooled.service.corpora.models import GoldRelation
    from unpooled.service.corpora.names import relation_label, relation_names
    from unpooled.service.submissions.models import RelationInstance

    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 2, "names")
    names = relation_names(corpus)
    assert names["P569"] == "date of birth" and names["P17"] == "country"
    inst = RelationInstance.objects.filter(submission=sub).order_by("pk").first()
    actions.request_verification(sub, [inst.pk])
    client.force_login(get_user_model().objects.create_user("org-names", password="pw-org-5517", is_staff=True))
    html = client.get(reverse("web:document", args=["names", inst.document_id])).content.decode()
    gold = GoldRelation.objects.filter(document_id=inst.document_id).first()
    assert f"<code>{gold.predicate}</code> {names[gold.predicate]}</td>" in html
    assert f"<code>{inst.predicate}</code> {names[inst.predicate]}</td>" in html  # the verified table
    assert f"subject of {relation_label(inst.predicate, names)}: open" in html  # the tooltip


@pytest.mark.django_db
def test_the_label_of_an_item_still_taking_answers_is_the_organisers_only(client, shared_data, tmp_path):
    """An item reopened for more answers (a weak relation's) keeps its label meanwhile; the document page showed
    it as "verified correct" to everyone, so its next annotator could read it before answering.  Until the task is
    complete again the page shows it open, but to organisers."""
    from unpooled.service.annotation import actions
    from unpooled.service.annotation.models import Kind, Label, Task
    from unpooled.service.submissions.models import RelationInstance

    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 2, "reopened")
    inst = RelationInstance.objects.filter(submission=sub).order_by("pk").first()
    actions.request_verification(sub, [inst.pk])
    task = Task.objects.get(corpus=corpus, kind=Kind.VERIFY, key=inst.key)
    Label.objects.create(corpus=corpus, key=task.key, key_hash=task.key_hash, task=task, probability=1.0,
                         correct=True, method="majority", n_answers=3, annotators=[], guideline_version="t")
    url = reverse("web:document", args=["reopened", inst.document_id])
    html = client.get(url).content.decode()
    assert "ver-ok" not in html and ": ok" not in html
    client.force_login(get_user_model().objects.create_user("org-reopened", password="pw-org-5513", is_staff=True))
    assert "ver-ok" in client.get(url).content.decode()
    Task.objects.filter(pk=task.pk).update(status=Task.Status.COMPLETE)
    client.logout()
    assert "ver-ok" in client.get(url).content.decode()  # complete again: its label is everybody's who sees it


def test_predicate_order_is_by_number():
    from unpooled.service.corpora.names import predicate_order, relation_label

    assert sorted(["P131", "P17", "P6", "per:spouse", "P1001"], key=predicate_order) == [
        "P6", "P17", "P131", "P1001", "per:spouse"]
    assert relation_label("P17", {"P17": "country"}) == "P17 country"
    assert relation_label("P99", {"P17": "country"}) == "P99"



@pytest.mark.parametrize("source, shown", [
    ("docred:/srv/data/redocred/dev_revised.json#3", "docred:dev_revised.json#3"),
    ("tac:/home/x/sources.xml:12", "tac:sources.xml:12"),
    ("jsonl:../shared/docs.jsonl:7", "jsonl:docs.jsonl:7"),
    ("text:/a/b/c.txt", "text:c.txt"),
    ("", "")])
def test_public_source_keeps_the_file_name_only(source, shown):
    from unpooled.service.corpora.names import public_source

    assert public_source(source) == shown


@pytest.mark.django_db
def test_an_item_awaiting_its_label_is_not_listed_to_annotators(client, shared_data, tmp_path):
    """The document page listed every open verification item of a public submission, to everyone, gold controls
    left out: an annotator who looked up the document of the claim before them saw it listed (an item) or not (a
    gold control, with the gold layer private), so the controls were told apart.  An item awaiting its label is now
    listed to the organisers and to the team whose submission asked for it only."""
    from unpooled.service.accounts.models import Profile, Role
    from unpooled.service.annotation import actions
    from unpooled.service.annotation.controls import create_verify_controls
    from unpooled.service.submissions.models import RelationInstance, Team

    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 2, "awaiting", team="asker")
    st = actions.settings_for(corpus)
    st.gold_public = False
    st.save()
    insts = list(RelationInstance.objects.filter(submission=sub).order_by("pk")[:3])
    actions.request_verification(sub, [i.pk for i in insts])
    create_verify_controls(corpus, 3, rng=0)
    url = reverse("web:document", args=["awaiting", insts[0].document_id])
    users = get_user_model().objects
    client.force_login(users.create_user("ann-awaiting", password="pw-ann-5514"))
    assert "ver-open" not in client.get(url).content.decode()     # an annotator
    client.logout()
    assert "ver-open" not in client.get(url).content.decode()     # anyone
    member = users.create_user("sub-awaiting", password="pw-sub-5515")
    Profile.objects.create(user=member, role=Role.SUBMITTER, team=Team.objects.get(name="asker"))
    client.force_login(member)
    assert "ver-open" in client.get(url).content.decode()         # the asking team sees its items awaiting labels
    client.force_login(users.create_user("org-awaiting", password="pw-org-5516", is_staff=True))
    assert "ver-open" in client.get(url).content.decode()
