"""Annotation pages through Django's test client: queue, the three task pages, skip, MTurk entry, console."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from unpooled.service.annotation import actions, leasing
from unpooled.service.annotation.models import Answer, Assignment, Kind, Task
from unpooled.service.corpora.models import Period
from unpooled.service.submissions.models import RelationInstance

from ..conftest import load_redocred_subset

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(shared_data, tmp_path):
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 3, "pages", team="zz-secret-team", run="zz-secret-run")
    ids = list(RelationInstance.objects.filter(submission=sub).values_list("pk", flat=True))[:5]
    actions.request_verification(sub, ids)
    User.objects.create_user("ann", password="pw-ann-123")
    return corpus


def _login(client):
    assert client.login(username="ann", password="pw-ann-123")


def test_queue_requires_login(client, setup):
    r = client.get(reverse("annotation:queue"))
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]


def test_verify_page_and_answer(client, setup):
    _login(client)
    r = client.get(reverse("annotation:next", args=["verify"]))
    assert r.status_code == 302
    page = client.get(r["Location"])
    html = page.content.decode()
    assert page.status_code == 200
    assert 'mark class="subj"' in html and 'mark class="obj"' in html
    assert "zz-secret" not in html  # the page never names the system
    token = r["Location"].rstrip("/").split("/")[-1]
    bad = client.post(r["Location"], {"answer": json.dumps({"relation": "maybe"})})
    assert bad.status_code == 400 and "relation: expected one of holds, other, none" in bad.content.decode()
    ok = client.post(r["Location"], {"answer": json.dumps({"relation": "holds", "subject_ok": True, "object_ok": True,
                                                           "link_ok": None}), "seconds": "4.2"})
    assert ok.status_code == 302 and ok["Location"].endswith("/annotate/next/verify/")
    ans = Answer.objects.get(assignment__token=token)
    assert ans.correct is True and ans.seconds == 4.2 and ans.cost_cents == 5 and ans.guideline_version


def test_skip_returns_the_task(client, setup):
    _login(client)
    r = client.get(reverse("annotation:next", args=["verify"]))
    token = r["Location"].rstrip("/").split("/")[-1]
    skipped = Assignment.objects.get(token=token)
    r = client.post(reverse("annotation:skip", args=[token]))
    assert Assignment.objects.get(token=token).status == Assignment.Status.SKIPPED
    nxt = client.get(r["Location"])  # the next task is another one, not the skipped task again
    assert nxt.status_code == 302 and nxt["Location"] != f"/annotate/task/{token}/"
    assert Assignment.objects.get(token=nxt["Location"].rstrip("/").split("/")[-1]).task_id != skipped.task_id
    # the slot is free for somebody else
    from unpooled.service.annotation.models import Annotator

    other = Annotator.objects.create(backend="inhouse", external_id="other")
    assert leasing.leasable(other).filter(pk=skipped.task_id).exists()


def test_entities_then_relations_pages(client, setup):
    from unpooled.core.sampling import sample_uniform

    corpus = setup
    actions.request_exhaustive(corpus, sample_uniform(corpus.n_documents, 1, rng=0))
    task = Task.objects.get(kind=Kind.ENTITIES)
    task.answers_needed = 1
    task.save()
    _login(client)
    r = client.get(reverse("annotation:next", args=["entities"]))
    page = client.get(r["Location"])
    assert page.status_code == 200 and 'class="tok"' in page.content.decode()
    text = task.document.text
    first_space = text.index(" ")
    value = {"mentions": [{"start": 0, "end": first_space, "type": "PER", "cluster": 1},
                          {"start": first_space + 1, "end": text.index(" ", first_space + 1), "type": "LOC", "cluster": 2}]}
    resp = client.post(r["Location"], {"answer": json.dumps(value)})
    assert resp.status_code == 302
    task.refresh_from_db()
    assert task.status == Task.Status.COMPLETE and len(task.result["mentions"]) == 2
    rel = Task.objects.get(kind=Kind.RELATIONS)
    assert rel.payload["pairs"] == [[0, 1]]
    rel.answers_needed = 1
    rel.save()
    r = client.get(reverse("annotation:next", args=["relations"]))
    page = client.get(r["Location"])
    assert page.status_code == 200 and 'class="pair"' in page.content.decode()
    pred = corpus.schema.schema().canonical_relations[0].name
    resp = client.post(r["Location"], {"answer": json.dumps({"pairs": {"0": [f"ba:{pred}"]}})})
    assert resp.status_code == 302
    rel.refresh_from_db()
    assert rel.result["relations"] == [[1, pred, 0]]


def test_organiser_page_requires_staff(client, setup):
    _login(client)
    assert client.get(reverse("organiser:annotation")).status_code == 403  # signed in, not an organiser
    User.objects.create_user("org", password="pw-org-123", is_staff=True)
    client.login(username="org", password="pw-org-123")
    page = client.get(reverse("organiser:annotation"))
    html = page.content.decode()
    assert page.status_code == 200 and 'id="kinds"' in html and 'id="annotators"' in html and "Fleiss" in html


def test_mturk_entry_preview_and_work(client, setup):
    """A HIT's signed link: preview shows the instructions only; a worker's assignment leases the task, the
    answer is stored quarantined and the page hands the assignment back to the MTurk host given."""
    from unpooled.service.annotation import hits
    from unpooled.service.annotation.models import Hit

    st = actions.settings_for(setup)
    st.backend = "mturk"
    st.save()
    task = Task.objects.filter(kind=Kind.VERIFY).first()
    hit = Hit.objects.create(task=task, request_token="tok-1", hit_id="H" * 30, max_assignments=3, status="posted")
    from urllib.parse import parse_qsl

    url, signed = reverse("annotation:mturk"), dict(parse_qsl(hits.task_query(task, hit)))
    prev = client.get(url, {**signed, "assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": hit.hit_id})
    assert prev.status_code == 200 and "Accept the HIT" in prev.content.decode()
    assert task.payload["subject"]["text"] not in prev.content.decode()  # the preview reads nothing of the task
    r = client.get(url, {**signed, "assignmentId": "A" * 30, "hitId": hit.hit_id, "workerId": "W" * 14,
                         "turkSubmitTo": "https://workersandbox.mturk.com"})
    assert r.status_code == 302
    lease = Assignment.objects.get(annotator__external_id="W" * 14)
    assert lease.external_ref == f"{hit.hit_id}/{'A' * 30}" and lease.submit_to == "https://workersandbox.mturk.com"
    page = client.get(r["Location"])
    assert page.status_code == 200 and "frame-ancestors https://www.mturk.com" in page["Content-Security-Policy"]
    done = client.post(r["Location"], {"answer": json.dumps({"relation": "none", "subject_ok": True, "object_ok": True,
                                                             "link_ok": None})})
    html = done.content.decode()
    assert done.status_code == 200 and 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in html
    assert f'value="{lease.token}"' in html and "<script>" not in html
    assert "form-action 'self' https://www.mturk.com https://workersandbox.mturk.com" in done["Content-Security-Policy"]
    ans = Answer.objects.get(assignment=lease)
    assert ans.quarantined and ans.weight == 0 and ans.cost_cents == 0
    assert client.get(reverse("annotation:mturk"), {"task": "x"}).status_code == 400


def test_document_view_shows_exhaustive_and_verified_layers(client, setup):
    from unpooled.core.sampling import sample_uniform
    from unpooled.service.crowd.simulated import SimulatedCrowd

    corpus = setup
    actions.request_exhaustive(corpus, sample_uniform(corpus.n_documents, corpus.n_documents, rng=0))
    SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0).run()
    doc = Task.objects.filter(kind=Kind.VERIFY).first().document
    url = reverse("web:document", args=[corpus.name, doc.pk])
    # the recall sample is the organisers' until a period's annotated data is released (security review N13)
    html = client.get(url).content.decode()
    assert 'id="exhaustive"' not in html and "inclusion probability" not in html and 'data-layer="exh"' not in html
    assert 'id="exhaustive-hidden"' in html
    assert 'id="verified"' in html and "majority" in html and ">correct<" in html
    staff = Client()
    staff.force_login(User.objects.create_user("olga-org", password="pw-olga-123", is_staff=True))
    html = staff.get(url).content.decode()
    assert 'id="exhaustive"' in html and "inclusion probability 1.0000" in html and 'id="exhaustive-hidden"' not in html
    Period.objects.create(corpus=corpus, number=1, opened=timezone.now(), closed=timezone.now(),
                          released=timezone.now())
    html = client.get(url).content.decode()
    assert 'id="exhaustive"' in html and "inclusion probability 1.0000" in html


def test_another_relation_offers_first_the_relations_usual_for_the_types():
    """UX review #13: the built-in DocRED schema's types are as observed, so one noisy triple admitted a type;
    the options that fit are those whose usual type pairs match (ORG -> LOC: 'country', not 'country of
    citizenship'; PER -> TIME: not 'followed by', 'part of' or 'has part'), the relations task's list too."""
    import json
    import re

    from unpooled.core.schema import builtin_schema
    from unpooled.service.annotation import views

    parts = views._SchemaParts(builtin_schema("docred"))

    def fitting(s, o):
        html = str(parts.relation_options(frozenset(s), frozenset(o)))
        return set(re.findall(r'<option value="([^"]*)"', html.split('id="fitting">')[1].split("</optgroup>")[0]))

    org_loc = fitting({"ORG"}, {"LOC"})
    assert "P17" in org_loc and "P159" in org_loc and "P27" not in org_loc
    per_time = fitting({"PER"}, {"TIME"})
    assert {"P569", "P570"} <= per_time and not per_time & {"P156", "P361", "P527"}
    assert len(per_time) < 12 and len(org_loc) < 25
    rels = {r[0]: r[2] for r in json.loads(parts.relations_json)}
    assert "PER>LOC" in rels["P27"] and "ORG>LOC" not in rels["P27"]


def test_task_page_fragments_built_once_are_exact_and_escaped(client, setup):
    """The relation list, the entity legend and the tokenised document are built in Python once per
    process (annotation.views): the document reads back exactly, and schema text is escaped."""
    import html as html_lib
    import re

    from unpooled.core.sampling import sample_uniform
    from unpooled.service.annotation import views

    corpus = setup
    row = corpus.schema
    d = row.definition
    d["relations"][0]["description"] = 'born <b>in</b> & "near"'
    row.definition = d
    row.save()
    views.forget()
    _login(client)
    r = client.get(reverse("annotation:next", args=["verify"]))
    page = client.get(r["Location"]).content.decode()
    select = page.split('id="other_predicate"')[1].split("</select>")[0]
    options = re.findall(r'<option value="([^"]*)">', select)
    schema = row.schema()
    assert options[0] == "" and sorted(options[1:]) == sorted(x.name for x in schema.canonical_relations)  # "choose…" first
    # the relations that fit the item's argument types come first, in their own group; then the others
    lease = Assignment.objects.get(token=r["Location"].rstrip("/").split("/")[-1])
    p = lease.task.payload
    s_types, o_types = views._argument_types(p, views._schema_parts(schema_id := row.pk))
    assert schema_id and s_types and o_types
    fits = [x.name for x in schema.canonical_relations if any(a in s_types and b in o_types for a, b in x.pairs)]
    assert 0 < len(fits) < len(schema.canonical_relations)
    assert p["predicate"] in fits                  # the claimed relation fits its own types
    assert options[1:len(fits) + 1] == fits and 'id="fitting"' in select
    assert "born &lt;b&gt;in&lt;/b&gt; &amp; &quot;near&quot;" in page and "<b>in</b>" not in page
    actions.request_exhaustive(corpus, sample_uniform(corpus.n_documents, 1, rng=0))
    task = Task.objects.get(kind=Kind.ENTITIES)
    r = client.get(reverse("annotation:next", args=["entities"]))
    page = client.get(r["Location"]).content.decode()
    doc = page.split('<div class="doc" id="doc"')[1].split(">", 1)[1].split("</div>")[0]
    text = task.document.text
    spans = re.findall(r'<span class="tok" data-s="(\d+)" data-e="(\d+)">([^<]*)</span>', doc)
    assert spans and all(html_lib.unescape(t) == text[int(s):int(e)] for s, e, t in spans)
    assert html_lib.unescape(re.sub(r"<[^>]+>", "", doc)) == text
    types = sorted(row.schema().entity_types)
    assert [page.count(f'<button type="button" class="tag c-{i + 1}" data-type="{t}"><kbd>{i + 1}</kbd> {t}</button>') for i, t in enumerate(types)] == [1] * len(types)
    # the instructions name exactly the schema's types, with their keys
    guide = page.split('<details class="guide"')[1].split("</details>")[0]
    assert all(f"{i + 1} {t} (" in guide for i, t in enumerate(types)) and "TIME or number" not in guide


def test_task_body_is_rendered_once(client, setup, monkeypatch, django_assert_max_num_queries):
    from unpooled.service.annotation import views

    _login(client)
    r = client.get(reverse("annotation:next", args=["verify"]))
    first = client.get(r["Location"]).content.decode()

    def boom(task):
        raise AssertionError("the task's body is in the cache")

    monkeypatch.setattr(views, "_body_context", boom)
    # the lease with its task and annotator, the user, whether the annotator answered before; the progress line
    # ("n done · m left for you"): the answers given, the annotator's scope, the items left
    with django_assert_max_num_queries(6):
        again = client.get(r["Location"]).content.decode()
    import re

    def unmasked(page):  # the CSRF token is masked afresh in every response, the server's time is the page's own
        return re.sub(r'data-now="[^"]*"', "", re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", page))

    assert unmasked(again) == unmasked(first) and 'mark class="subj"' in again
    assert "{#" not in first and "#}" not in first, "a template comment leaked into the page"


def test_the_other_relation_list_reads_no_gold_type(setup):
    """The verification page's "another relation" list put first the relations fitting the gold layer's types of
    mentions at exactly the item's spans (else the claimed relation's usual types): with the gold layer private, its
    group's label ("fit PER → LOC") told that a span was a gold mention and which type it had, and a gold control,
    whose spans are always gold mentions, always showed gold types.  The list now reads the claimed relation's usual
    types only, for every item alike."""
    import re

    from unpooled.service.annotation import views
    from unpooled.service.annotation.controls import create_verify_controls

    corpus = setup
    create_verify_controls(corpus, 4, rng=0)
    parts = views._schema_parts(corpus.schema_id)
    seen = 0
    for task in Task.objects.filter(kind=Kind.VERIFY).select_related("corpus"):
        html = views._body(task)
        label = re.search(r'<optgroup label="fit ([^"]*)" id="fitting">', html)
        pairs = parts.pairs[task.payload["predicate"]]
        subj, obj = sorted({a for a, _ in pairs}), sorted({b for _, b in pairs})
        assert label is None or label.group(1) == f"{'/'.join(subj)} → {'/'.join(obj)}", (task.is_control, label.group(1))
        seen += label is not None
    assert seen
