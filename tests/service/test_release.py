"""The dataset release (annotation/release.py): content and counts, pseudonyms, the exhaustive file read by
the offline scorer, the command line (``unpooled annotate export``) and the console's zip download."""

from __future__ import annotations

import io
import json
import zipfile
from collections import Counter

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from unpooled.cli.main import main
from unpooled.core.matching import InstanceRef
from unpooled.core.offline import read_exhaustive
from unpooled.service.annotation import actions, leasing
from unpooled.service.annotation.clustering import clustering_tasks, nil_identity, nil_items
from unpooled.service.annotation.models import Annotator, Answer, Backend, ExhaustiveDocument, Kind, Label, Task
from unpooled.service.annotation.release import RELEASE_FILES, export_release, pseudonym
from unpooled.service.annotation.sampling import sample_documents
from unpooled.service.crowd.simulated import SimulatedCrowd
from unpooled.service.submissions.models import RelationInstance

from ..conftest import load_redocred_subset

pytestmark = pytest.mark.django_db

MTURK_WORKER = "A3MTURKWORKERXYZ"
INHOUSE_USER = "alice-annotator"


def _read(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def pool(shared_data, tmp_path):
    """6 Re-DocRED documents: 20 verification items, 2 exhaustive documents, answered by a simulated
    crowd plus one Mechanical Turk worker and one in-house annotator; majority and Dawid–Skene labels."""
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 6, "release")
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:20]
    res = actions.request_verification(sub, ids)
    assert res.created > 10
    sample_documents(corpus, "uniform", 2, seed=1)
    # a Mechanical Turk worker and an in-house user answer first (their ids must not leak)
    turk = Annotator.objects.create(backend=Backend.MTURK, external_id=MTURK_WORKER)
    user = User.objects.create_user(INHOUSE_USER, password="pw-alice-123")
    inhouse = leasing.annotator_for_user(user)
    for ann in (turk, inhouse):
        lease = leasing.lease_next(ann, kind=Kind.VERIFY, corpus=corpus)
        actions.submit_answer(lease, {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None},
                              seconds=7.5)
        if ann is turk:  # as collect does once Amazon lists the assignment (until then it is quarantined)
            assert actions.confirm_mturk_answer(lease)
    SimulatedCrowd.uniform(corpus, 5, accuracy=0.8, rng=3).run()
    assert not Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, is_control=False).exists()
    assert actions.reaggregate(corpus) > 0
    return corpus, sub


def test_export_content_and_counts(pool, tmp_path):
    corpus, _ = pool
    out = tmp_path / "release"
    c = export_release(corpus, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(RELEASE_FILES)

    # labels: every row, oldest first; exactly the newest row of each key is current
    labels = _read(out / "labels.jsonl")
    rows = list(Label.objects.filter(corpus=corpus).order_by("id"))
    assert len(labels) == len(rows) == c.label_rows and c.files["labels.jsonl"] == len(rows)
    assert Counter(r["method"] for r in labels) == Counter(r.method for r in rows) == Counter(c.labels_by_method)
    assert {"majority", "dawid-skene"} <= set(c.labels_by_method)
    newest = {}
    for r in rows:
        newest[r.key] = r
    current = [x for x in labels if not x["superseded"]]
    assert len(current) == len(newest) == c.label_keys
    assert {x["key"]: (x["correct"], x["method"]) for x in current} == \
        {k: (r.correct, r.method) for k, r in newest.items()}
    assert c.labels_correct == sum(r.correct for r in newest.values())
    first = labels[0]
    assert set(first) == {"key", "doc", "subject", "predicate", "object", "correct", "probability", "method",
                          "n_answers", "annotators", "guideline_version", "created", "superseded"}
    texts = dict(corpus.documents.values_list("doc_id", "text"))
    for x in labels:
        ref = InstanceRef.from_key(x["key"])
        assert (x["doc"], x["subject"]["start"], x["subject"]["end"], x["predicate"]) == \
            (ref.doc, ref.s_start, ref.s_end, ref.predicate)
        assert x["subject"]["text"] == texts[x["doc"]][x["subject"]["start"]:x["subject"]["end"]]
        assert x["object"]["text"] == texts[x["doc"]][x["object"]["start"]:x["object"]["end"]]
        assert 0 <= x["probability"] <= 1 and x["n_answers"] == len(x["annotators"])

    # answers: every answer, with its kind; controls and counted flags
    answers = _read(out / "answers.jsonl")
    assert len(answers) == Answer.objects.filter(task__corpus=corpus).count() == c.answers
    assert Counter(a["kind"] for a in answers) == Counter(
        Answer.objects.filter(task__corpus=corpus).values_list("task__kind", flat=True))
    assert c.answers_by_kind[Kind.VERIFY] > 0 and c.answers_by_kind[Kind.ENTITIES] == 6
    assert sum(a["counted"] for a in answers) == c.answers_counted
    ver = [a for a in answers if a["kind"] == Kind.VERIFY]
    assert all(isinstance(a["correct"], bool) and a["key"] for a in ver)
    assert {a["backend"] for a in answers} == {"mturk", "inhouse", "simulated"}
    assert c.annotators == 7 and c.annotators_by_backend == {"inhouse": 1, "mturk": 1, "simulated": 5}
    assert any(a["seconds"] == 7.5 for a in answers)

    # exhaustive: one line per sampled document, complete, mentions with groups, relations by mention index
    ex = _read(out / "exhaustive.jsonl")
    sampled = {e.document.doc_id: e for e in ExhaustiveDocument.objects.filter(corpus=corpus).select_related("document")}
    assert {e["doc"] for e in ex} == set(sampled) and len(ex) == c.exhaustive_documents == 2
    assert all(e["status"] == "complete" for e in ex) and c.exhaustive_complete == 2
    for e in ex:
        assert e["inclusion"] == pytest.approx(sampled[e["doc"]].inclusion) and e["scheme"] == "uniform"
        assert e["mentions"] and all({"start", "end", "text", "type", "group", "link"} <= set(m) for m in e["mentions"])
        assert all(m["text"] == texts[e["doc"]][m["start"]:m["end"]] for m in e["mentions"])
        assert e["answers"]["entities"] == 3
        for r in e["relations"]:
            s, o = e["mentions"][r["subject"]], e["mentions"][r["object"]]
            assert r["key"] == InstanceRef(e["doc"], s["start"], s["end"], r["predicate"], o["start"], o["end"]).key
    assert sum(len(e["relations"]) for e in ex) == c.exhaustive_relations > 0
    assert sum(len(e["mentions"]) for e in ex) == c.exhaustive_mentions

    # documents: ids, titles, checksums; never the text
    docs = _read(out / "documents.jsonl")
    assert len(docs) == corpus.n_documents == c.documents == 6
    assert all(set(d) == {"doc", "title", "length", "sha256", "labelled_keys", "exhaustive"} for d in docs)
    assert sum(d["exhaustive"] for d in docs) == 2
    assert sum(d["labelled_keys"] for d in docs) == c.label_keys
    blob = "".join((out / n).read_text(encoding="utf-8") for n in RELEASE_FILES)
    longest = max(texts.values(), key=len)
    assert longest[:300] not in blob  # no document text beyond short span quotes

    # per predicate
    assert sum(d["labelled"] for d in c.predicates.values()) == c.label_keys
    assert sum(d["exhaustive"] for d in c.predicates.values()) == c.exhaustive_relations

    # README: counts, formats, scoring, licence, generation time
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert f"| labelled instance keys (current labels) | {c.label_keys:,} |" in readme
    assert f"| answers (`answers.jsonl`) | {c.answers:,} " in readme
    assert f"| annotators (pseudonymous) | {c.annotators:,} " in readme
    assert f"{c.correct_share * 100:.1f}%" in readme
    for name in RELEASE_FILES[:-1]:
        assert f"**`{name}`**" in readme
    assert "unpooled score --labels L.jsonl --submissions DIR --exhaustive exhaustive_instances.jsonl" in readme
    assert "CC BY 4.0" in readme and c.generated in readme
    some = next(iter(c.predicates))
    assert f"| `{some}` | {c.predicates[some]['labelled']:,} |" in readme


def test_annotators_are_pseudonymised(pool, tmp_path):
    corpus, _ = pool
    out = tmp_path / "release"
    export_release(corpus, out)
    blob = "".join((out / n).read_text(encoding="utf-8") for n in RELEASE_FILES)
    for ann in Annotator.objects.all():
        assert ann.external_id not in blob
    assert MTURK_WORKER not in blob and INHOUSE_USER not in blob and "sim-01" not in blob
    answers = _read(out / "answers.jsonl")
    by_pk = {a.pk: a for a in Answer.objects.filter(task__corpus=corpus)}
    for a in answers:
        assert a["annotator"] == pseudonym(by_pk[a["id"]].annotator_id)
        assert a["annotator"].startswith("a") and len(a["annotator"]) == 17
    turk = Annotator.objects.get(external_id=MTURK_WORKER)
    assert pseudonym(turk.pk) in {a["annotator"] for a in answers if a["backend"] == "mturk"}
    assert pseudonym(turk.pk) != pseudonym(turk.pk, secret="another key")
    # labels name the same pseudonyms as the answers they were made from
    names = {a["annotator"] for a in answers}
    assert all(set(x["annotators"]) <= names for x in _read(out / "labels.jsonl"))
    # another key: other pseudonyms, same data otherwise
    other = tmp_path / "other"
    export_release(corpus, other, secret="another key")
    assert {a["annotator"] for a in _read(other / "answers.jsonl")}.isdisjoint(names)


def test_exhaustive_instances_are_offline_scorer_input(pool, tmp_path, capsys):
    from unpooled.service.evaluations.inputs import exhaustive_truth
    from unpooled.service.submissions.actions import export_submission

    corpus, sub = pool
    out = tmp_path / "release"
    c = export_release(corpus, out)
    true, rep = read_exhaustive(out / "exhaustive_instances.jsonl")
    assert rep.ok and not rep.diagnostics, [d.format() for d in rep.diagnostics]
    assert len(true) == c.exhaustive_relations
    inclusion = {e.document.doc_id: e.inclusion for e in ExhaustiveDocument.objects.filter(corpus=corpus)
                 .select_related("document")}
    assert all(t.inclusion == pytest.approx(inclusion[t.ref.doc]) and t.weight == 1.0 for t in true)
    # the same true instances the service scores recall with (symmetric relations: argument order by span)
    schema = corpus.schema.schema()

    def canonical(ref):
        if schema.relations[ref.predicate].symmetric and (ref.o_start, ref.o_end) < (ref.s_start, ref.s_end):
            ref = InstanceRef(ref.doc, ref.o_start, ref.o_end, ref.predicate, ref.s_start, ref.s_end)
        return ref.key

    service, docs = exhaustive_truth(corpus)
    assert docs == 2
    assert {t.key for t in true} == {canonical(t.ref) for t in service}

    # and `unpooled score` runs on the release: the submission, labels of its pooled instances by key
    subs = tmp_path / "systems"
    subs.mkdir()
    with open(subs / "docred.jsonl", "w", encoding="utf-8") as fh:
        export_submission(sub, "jsonl", fh)
    pooled = {x["key"]: x for x in _read(out / "labels.jsonl") if not x["superseded"]}
    mine = set(RelationInstance.objects.filter(submission=sub).values_list("key", flat=True))
    with open(tmp_path / "L.jsonl", "w") as fh:
        for key in sorted(set(pooled) & mine):
            fh.write(json.dumps({"system": "docred", "key": key, "label": int(pooled[key]["correct"])}) + "\n")
    code = main(["score", "--labels", str(tmp_path / "L.jsonl"), "--submissions", str(subs),
                 "--exhaustive", str(out / "exhaustive_instances.jsonl"), "--estimator", "simple", "--json"])
    got = capsys.readouterr()
    assert code == 0, got.err
    rows = json.loads(got.out)
    assert rows[0]["system"] == "docred" and 0 <= rows[0]["r"] <= 1


def test_the_readmes_scoring_snippet_runs_on_the_release(pool, tmp_path, capsys, monkeypatch):
    """The README's Python snippet, run as it stands in the release folder beside a system's DIR/NAME.jsonl, writes
    the labels `unpooled score` reads (the README's own command line)."""
    import re

    from unpooled.service.submissions.actions import export_submission

    corpus, sub = pool
    out = tmp_path / "release"
    export_release(corpus, out)
    (snippet,) = re.findall(r"```python\n(.*?)```", (out / "README.md").read_text(encoding="utf-8"), re.S)
    (out / "DIR").mkdir()
    with open(out / "DIR" / "NAME.jsonl", "w", encoding="utf-8") as fh:
        export_submission(sub, "jsonl", fh)
    monkeypatch.chdir(out)
    exec(compile(snippet, "README.md", "exec"), {"__name__": "release_readme"})
    labels = _read(out / "L.jsonl")
    assert labels and {x["system"] for x in labels} == {"NAME"}
    code = main(["score", "--labels", "L.jsonl", "--submissions", "DIR", "--exhaustive", "exhaustive_instances.jsonl",
                 "--json"])
    got = capsys.readouterr()
    assert code == 0, got.err
    assert json.loads(got.out)[0]["labels"] == len(labels)


def test_cli_export(pool, tmp_path, capsys):
    corpus, _ = pool
    out = tmp_path / "cli-release"
    code = main(["annotate", "export", "--corpus", corpus.name, "-o", str(out), "--json", "--licence", "CC0 1.0"])
    got = capsys.readouterr()
    assert code == 0, got.err
    counts = json.loads(got.out)
    assert counts["output"] == str(out) and counts["label_keys"] == len(_read(out / "labels.jsonl")) - sum(
        x["superseded"] for x in _read(out / "labels.jsonl"))
    assert "CC0 1.0" in (out / "README.md").read_text()
    # a second export into the same folder needs --force
    code = main(["annotate", "export", "--corpus", corpus.name, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 3 and err.strip() == (f"unpooled: error: -o {out}: {out / 'labels.jsonl'} exists (a release is "
                                         "there already); use --force to replace it")
    code = main(["annotate", "export", "--corpus", corpus.name, "-o", str(out), "--force"])
    text = capsys.readouterr().out
    assert code == 0 and text.startswith(f"release of corpus {corpus.name} written to {out}: ")
    # a zip file
    zpath = tmp_path / "release.zip"
    assert main(["annotate", "export", "--corpus", corpus.name, "-o", str(zpath)]) == 0
    capsys.readouterr()
    with zipfile.ZipFile(zpath) as zf:
        assert sorted(n.split("/", 1)[1] for n in zf.namelist()) == sorted(RELEASE_FILES)
    code = main(["annotate", "export", "--corpus", "nope", "-o", str(tmp_path / "x")])
    assert code == 3 and "--corpus 'nope': no such corpus" in capsys.readouterr().err


def test_console_zip_download(pool, client):
    corpus, _ = pool
    url = reverse("organiser:release") + f"?corpus={corpus.name}"
    User.objects.create_user("plain", password="pw-plain-123")
    client.login(username="plain", password="pw-plain-123")
    assert client.get(url).status_code == 403
    User.objects.create_user("org", password="pw-org-123", is_staff=True)
    client.login(username="org", password="pw-org-123")
    r = client.get(url)
    assert r.status_code == 200 and r["Content-Type"] == "application/zip"
    assert f'filename="unpooled-release-{corpus.name}-' in r["Content-Disposition"]
    zf = zipfile.ZipFile(io.BytesIO(b"".join(r.streaming_content)))
    names = zf.namelist()
    top = names[0].split("/")[0]
    assert sorted(names) == sorted(f"{top}/{n}" for n in RELEASE_FILES)
    readme = zf.read(f"{top}/README.md").decode()
    assert f"# Annotation release: corpus `{corpus.name}`" in readme
    assert MTURK_WORKER.encode() not in b"".join(zf.read(n) for n in names)


def test_a_document_whose_entity_task_was_reopened_keeps_its_relations_and_mentions(pool, tmp_path):
    """The relations task is complete but its entity task is open again (an answer discounted): the export lists
    the mentions the relations were made on (it raised IndexError when the mentions came only from a complete
    entity task)."""
    corpus, _ = pool
    ex = ExhaustiveDocument.objects.filter(corpus=corpus).select_related("document").first()
    ent = Task.objects.get(corpus=corpus, kind=Kind.ENTITIES, document=ex.document, key="", is_control=False)
    rel = Task.objects.get(corpus=corpus, kind=Kind.RELATIONS, document=ex.document, key="", is_control=False)
    assert rel.status == Task.Status.COMPLETE and (rel.result or {}).get("relations")
    Task.objects.filter(pk=ent.pk).update(status=Task.Status.OPEN)
    out = tmp_path / "release"
    export_release(corpus, out)
    row = next(x for x in _read(out / "exhaustive.jsonl") if x["doc"] == ex.document.doc_id)
    assert row["status"] == "complete"
    assert len(row["mentions"]) == len(rel.payload["mentions"])
    assert row["relations"] and all(r["subject"] < len(row["mentions"]) for r in row["relations"])


# ---------------------------------------------------------------------------- the cross-document clustering task

def _clusters_line(out, task) -> dict:
    return next(x for x in _read(out / "clusters.jsonl") if x["task"] == task.pk)


def test_clustering_task_items_answers_and_clusters(pool, tmp_path):
    """``clusters.jsonl``: the items the task showed (joined to ``exhaustive.jsonl`` by document and group), every
    answer under its pseudonym (the same answers as ``answers.jsonl``) and the clusters and agreement figures the
    service aggregated, which the released counted answers reproduce; the README counts it."""
    from unpooled.core.annotation.clustering import aggregate_clusters

    corpus, _ = pool
    task = Task.objects.get(corpus=corpus, kind=Kind.CLUSTERS)
    assert task.status == Task.Status.COMPLETE and clustering_tasks(corpus) == [task]
    out = tmp_path / "release"
    c = export_release(corpus, out)
    lines = _read(out / "clusters.jsonl")
    assert len(lines) == c.files["clusters.jsonl"] == c.cluster_tasks == c.cluster_tasks_complete == 1
    row = lines[0]
    assert set(row) == {"task", "status", "current", "block", "guideline_version", "created", "completed", "items",
                        "items_dropped", "answers", "clusters", "agreement", "aggregated_answers"}
    assert (row["task"], row["status"], row["current"]) == (task.pk, "complete", True)

    # items: the stored canonical mentions, without the text around them
    stored = task.payload["items"]
    assert len(row["items"]) == len(stored) == c.cluster_items >= 2
    texts = dict(corpus.documents.values_list("doc_id", "text"))
    groups = {(e["doc"], m["group"]): m for e in _read(out / "exhaustive.jsonl") for m in e["mentions"]}
    for i, (it, st) in enumerate(zip(row["items"], stored)):
        assert it == {"index": i, "doc": st["doc"], "group": st["cluster"], "type": st["type"], "start": st["start"],
                      "end": st["end"], "text": st["text"], "context": st["context"]}
        assert it["text"] == texts[it["doc"]][it["start"]:it["end"]]
        assert (it["doc"], it["group"]) in groups and not groups[(it["doc"], it["group"])]["link"]

    # answers: pseudonymised, the task's answers as answers.jsonl has them
    db = list(Answer.objects.filter(task=task).order_by("id"))
    assert [a["id"] for a in row["answers"]] == [a.pk for a in db] and len(db) == c.cluster_answers >= 3
    for got, a in zip(row["answers"], db):
        assert got["annotator"] == pseudonym(a.annotator_id) and got["groups"] == a.value["groups"]
        assert got["counted"] == (a.weight > 0) and got["backend"] == "simulated"
    flat = {a["id"]: a for a in _read(out / "answers.jsonl")}
    assert all(flat[a["id"]]["kind"] == "clusters" and flat[a["id"]]["annotator"] == a["annotator"]
               for a in row["answers"])

    # the aggregated clusters, as stored when the task completed and as the core computes them from the answers
    assert (row["clusters"], row["agreement"], row["aggregated_answers"]) == (
        task.result["clusters"], task.result["agreement"], task.result["answers"])
    counted = [{"groups": a["groups"]} for a in row["answers"] if a["counted"]]
    assert aggregate_clusters(counted, len(row["items"])) == task.result
    assert c.cross_document_clusters == len(row["clusters"])

    readme = (out / "README.md").read_text(encoding="utf-8")
    assert f"| cross-document clustering tasks (`clusters.jsonl`) | {c.cluster_tasks:,} (1 complete) |" in readme
    assert f"| answers to them | {c.cluster_answers:,} |" in readme
    assert f"current clustering's items) | {c.cluster_items:,} |" in readme


@pytest.fixture
def clustering(shared_data, tmp_path):
    """Three Re-DocRED documents annotated exhaustively by the simulated crowd (the gold layer): the clustering
    task over their unlinked entities is open, alone (as in test_mturk_clusters)."""
    from types import SimpleNamespace

    corpus, _, _ = load_redocred_subset(shared_data, tmp_path, 3, "relclu")
    actions.request_exhaustive(corpus, SimpleNamespace(indices=[0, 1, 2], inclusion=[1.0] * 3, stage=[1] * 3,
                                                       scheme="uniform"))
    crowd = SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0)
    crowd.run(kinds=[Kind.ENTITIES, Kind.RELATIONS])
    task = Task.objects.get(corpus=corpus, kind=Kind.CLUSTERS, status=Task.Status.OPEN)
    return corpus, crowd, task


def test_unconfirmed_mturk_clustering_answers_are_not_released(clustering, tmp_path):
    """A Mechanical Turk answer Amazon never confirmed (a forger's: quarantined) stays out of ``clusters.jsonl``
    as out of ``answers.jsonl``; a confirmed one is released under its pseudonym; the clusters are the
    confirmed answers'."""
    corpus, crowd, task = clustering
    n = len(task.payload["items"])
    forger = Annotator.objects.create(backend=Backend.MTURK, external_id="A9FORGEDCLUSTERS")
    honest = Annotator.objects.create(backend=Backend.MTURK, external_id="A1HONESTCLUSTERS")
    leases = {}
    for ann in (forger, honest):
        leases[ann] = leasing.lease_next(ann, kind=Kind.CLUSTERS, corpus=corpus)
        actions.submit_answer(leases[ann], {"groups": [list(range(n))]} if ann is forger
                              else {"groups": [[i] for i in range(n)]}, seconds=60)
    assert actions.confirm_mturk_answer(leases[honest])
    crowd.run(kinds=[Kind.CLUSTERS])
    task.refresh_from_db()
    assert task.status == Task.Status.COMPLETE and task.result["answers"] == 3
    forged = Answer.objects.get(task=task, annotator=forger)
    assert forged.quarantined

    out = tmp_path / "release"
    c = export_release(corpus, out)
    row = _clusters_line(out, task)
    ids = [a["id"] for a in row["answers"]]
    assert forged.pk not in ids and forged.pk not in {a["id"] for a in _read(out / "answers.jsonl")}
    assert ids == list(Answer.objects.filter(task=task, quarantined=False).order_by("id").values_list("id", flat=True))
    assert pseudonym(honest.pk) in {a["annotator"] for a in row["answers"]}
    assert c.cluster_answers == len(ids) == task.answers.count() - 1
    assert row["clusters"] == task.result["clusters"] and len(row["clusters"]) > 1  # not the forger's one group
    blob = "".join((out / name).read_text(encoding="utf-8") for name in RELEASE_FILES)
    assert "A9FORGEDCLUSTERS" not in blob and "A1HONESTCLUSTERS" not in blob


def test_a_period_release_holds_the_whole_clustering(clustering, tmp_path):
    """A period's release holds the corpus's clustering whole, as its exhaustive annotation (every period's NIL
    clustering scores use it): its answers in ``clusters.jsonl`` and in ``answers.jsonl``, whatever the window."""
    from datetime import datetime, timezone

    corpus, crowd, task = clustering
    crowd.run(kinds=[Kind.CLUSTERS])
    long_ago = datetime(2001, 1, 1, tzinfo=timezone.utc)
    scope = {"period": 1, "key_hashes": set(), "opened": long_ago, "closed": long_ago,
             "cut": datetime.now(timezone.utc)}
    out = tmp_path / "release"
    c = export_release(corpus, out, scope=scope)
    row = _clusters_line(out, task)
    ids = sorted(Answer.objects.filter(task=task).values_list("id", flat=True))
    assert sorted(a["id"] for a in row["answers"]) == ids and row["status"] == "complete" and row["current"]
    assert sorted(a["id"] for a in _read(out / "answers.jsonl") if a["kind"] == "clusters") == ids
    assert c.answers_by_kind[Kind.CLUSTERS] == len(ids) and c.answers_by_kind[Kind.VERIFY] == 0
    assert "with its cross-document clustering" in (out / "README.md").read_text(encoding="utf-8")


def test_a_period_release_holds_the_annotation_as_it_stood_at_its_cut(clustering, tmp_path):
    """A period's release is cut at its last frozen score: a relation layer or a clustering completed after it is
    released as it was then (not complete: no relations, no clusters, not current), and the documents sampled and
    the answers given after it are left out, so the frozen recall and entity scores are computed from what it
    holds.  (It held the exhaustive annotation and the clustering as they were when the zip was made.)"""
    from datetime import timedelta

    from django.utils import timezone

    corpus, crowd, task = clustering
    crowd.run(kinds=[Kind.CLUSTERS])
    task.refresh_from_db()
    rels = list(Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, status=Task.Status.COMPLETE)
                .select_related("document").order_by("id"))
    assert task.status == Task.Status.COMPLETE and len(rels) == 3
    cut = timezone.now()
    later = cut + timedelta(hours=1)
    Task.objects.filter(pk__in=[task.pk, rels[0].pk]).update(completed=later)
    Answer.objects.filter(task__in=[task, rels[0]]).update(created=later)
    ExhaustiveDocument.objects.filter(corpus=corpus, document=rels[1].document).update(created=later)
    scope = {"period": 1, "key_hashes": set(), "opened": cut - timedelta(days=1), "closed": cut, "cut": cut}
    out = tmp_path / "release"
    c = export_release(corpus, out, scope=scope)

    ex = {e["doc"]: e for e in _read(out / "exhaustive.jsonl")}
    late, sampled_late, done = (t.document.doc_id for t in rels)
    assert set(ex) == {late, done} and c.exhaustive_documents == 2  # sampled after the cut: left out
    assert (ex[late]["status"], ex[late]["relations"], ex[late]["answers"]["relations"]) == (
        "annotating relations", [], 0)
    assert ex[late]["mentions"] and ex[done]["status"] == "complete" and c.exhaustive_complete == 1
    assert {i["doc"] for i in _read(out / "exhaustive_instances.jsonl")} <= {done}
    row = _clusters_line(out, task)
    assert (row["status"], row["current"], row["clusters"], row["completed"], row["answers"]) == (
        "open", False, None, None, [])
    assert c.cross_document_clusters == 0 and c.answers_by_kind[Kind.CLUSTERS] == 0
    assert c.as_of == cut.isoformat(timespec="seconds")
    assert f"as they stood at {c.as_of}" in (out / "README.md").read_text(encoding="utf-8")
    # the corpus's own release (no scope) holds everything, now
    whole = export_release(corpus, tmp_path / "whole")
    assert (whole.exhaustive_documents, whole.exhaustive_complete, whole.as_of) == (3, 3, None)
    assert _clusters_line(tmp_path / "whole", task)["current"]


def test_a_clustering_task_a_newer_layer_cancelled_is_listed_without_clusters(shared_data, tmp_path):
    """A newer exhaustive layer replaces the open clustering task (a third document adds items): both tasks are
    listed with their answers; the cancelled one has no clusters, the complete new one is current."""
    from types import SimpleNamespace

    corpus, _, _ = load_redocred_subset(shared_data, tmp_path, 3, "relclu2")
    actions.request_exhaustive(corpus, SimpleNamespace(indices=[0, 1], inclusion=[0.5] * 2, stage=[1] * 2,
                                                       scheme="uniform"))
    crowd = SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0)
    crowd.run(kinds=[Kind.ENTITIES, Kind.RELATIONS])
    old = Task.objects.get(corpus=corpus, kind=Kind.CLUSTERS, status=Task.Status.OPEN)
    lease = leasing.lease_next(crowd.annotators[0], kind=Kind.CLUSTERS, corpus=corpus)
    actions.submit_answer(lease, {"groups": [[i] for i in range(len(old.payload["items"]))]})
    actions.request_exhaustive(corpus, SimpleNamespace(indices=[2], inclusion=[0.5], stage=[2], scheme="uniform"))
    crowd.run(kinds=[Kind.ENTITIES, Kind.RELATIONS, Kind.CLUSTERS])
    old.refresh_from_db()
    new = Task.objects.get(corpus=corpus, kind=Kind.CLUSTERS, status=Task.Status.COMPLETE)
    assert old.status == Task.Status.CANCELLED

    out = tmp_path / "release"
    c = export_release(corpus, out)
    assert [x["task"] for x in _read(out / "clusters.jsonl")] == [old.pk, new.pk]
    row = _clusters_line(out, old)
    assert (row["status"], row["current"], row["clusters"], row["agreement"]) == ("cancelled", False, None, None)
    assert [a["id"] for a in row["answers"]] == [Answer.objects.get(assignment=lease).pk]
    row = _clusters_line(out, new)
    assert row["status"] == "complete" and row["current"] and row["clusters"] == new.result["clusters"]
    assert (c.cluster_tasks, c.cluster_tasks_complete, c.cluster_items) == (2, 1, len(new.payload["items"]))
    assert c.cluster_answers == 1 + new.answers.count() and c.cross_document_clusters == len(new.result["clusters"])


def test_a_corpus_without_clustering_has_an_empty_clusters_file(shared_data, tmp_path):
    corpus, _, _ = load_redocred_subset(shared_data, tmp_path, 2, "noclu")
    out = tmp_path / "release"
    c = export_release(corpus, out)
    assert sorted(p.name for p in out.iterdir()) == sorted(RELEASE_FILES)
    assert (out / "clusters.jsonl").read_text() == "" and c.files["clusters.jsonl"] == 0
    assert (out / "exhaustive.jsonl").read_text() == ""  # as the other files with nothing to hold
    assert c.cluster_tasks == c.cluster_answers == c.cluster_items == 0
    assert "| cross-document clustering tasks (`clusters.jsonl`) | 0 (0 complete) |" in (
        out / "README.md").read_text(encoding="utf-8")


def test_a_large_clustering_is_split_into_tasks_by_type_and_all_of_them_are_used(shared_data, tmp_path, monkeypatch,
                                                                                client):
    """Above MAX_ITEMS (here 4, so that 3 documents exceed it; the demo's 40 documents hold 847) the unlinked
    entities are split by type, large types in runs of similar names: every item in exactly one task of at most
    MAX_ITEMS items; the scores read every task's clusters once all are complete, the page says how many tasks, the
    release marks them all current."""
    import unpooled.core.annotation.clustering as clu
    from unpooled.service.evaluations import entities
    from unpooled.service.evaluations.models import EntityScore

    monkeypatch.setattr(clu, "MAX_ITEMS", 4)
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 3, "blocks")
    sample_documents(corpus, "uniform", 3, seed=0)
    crowd = SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0)
    crowd.run(kinds=[Kind.ENTITIES, Kind.RELATIONS])
    items = nil_items(corpus)
    tasks = list(Task.objects.filter(corpus=corpus, kind=Kind.CLUSTERS).order_by("id"))
    assert len(items) > 4 and len(tasks) >= 2
    shown = [(it["doc"], it["cluster"]) for t in tasks for it in t.payload["items"]]
    singles = {t for t, n in Counter(it["type"].upper() for it in items).items() if n == 1}
    assert sorted(shown) == sorted((it["doc"], it["cluster"]) for it in items if it["type"].upper() not in singles)
    for b, t in enumerate(tasks):
        assert 2 <= len(t.payload["items"]) <= 4 and len({it["type"].upper() for it in t.payload["items"]}) == 1
        assert t.payload["block"] == [b, len(tasks)] and t.key.endswith(f":{b + 1}/{len(tasks)}")
    crowd.run(kinds=[Kind.CLUSTERS])
    assert all(t.status == Task.Status.COMPLETE for t in Task.objects.filter(pk__in=[t.pk for t in tasks]))
    assert [t.pk for t in clustering_tasks(corpus)] == [t.pk for t in tasks]
    # while one block is still open the generation is not in use (nor, here, any older one)
    Task.objects.filter(pk=tasks[-1].pk).update(status=Task.Status.OPEN)
    assert clustering_tasks(corpus) == [] and nil_identity(corpus) == {}
    Task.objects.filter(pk=tasks[-1].pk).update(status=Task.Status.COMPLETE)
    identity = nil_identity(corpus)
    assert set(identity) == set(shown)
    assert {i[0] for i in identity.values()} == {t.pk for t in tasks}  # entities of two tasks never join
    entities.compute(corpus)
    es = EntityScore.objects.filter(submission=sub).order_by("-id").first()
    assert es.details["nil_across_documents"] is True
    html = client.get(f"/submissions/{sub.pk}/?level=entity").content.decode()
    assert f"in {len(tasks)} tasks (by entity type" in html
    c = export_release(corpus, tmp_path / "rel")
    rows = _read(tmp_path / "rel" / "clusters.jsonl")
    assert [r["current"] for r in rows] == [True] * len(tasks) and c.cluster_items == len(shown)
    assert [r["block"] for r in rows] == [[b, len(tasks)] for b in range(len(tasks))]
