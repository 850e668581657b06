"""Storage: corpora and atomic submission ingestion, on SQLite and PostgreSQL."""

from __future__ import annotations

import gzip

import pytest
from django.apps import apps
from django.db import connection

from unpooled.core.corpus import iter_documents
from unpooled.core.kb import InMemoryCorpus, read_tac
from unpooled.core.kb.model import key_hash
from unpooled.service.corpora.actions import ActionError, do_ensure_schema, do_load_corpus
from unpooled.service.corpora.corpus_view import DbCorpusView
from unpooled.service.corpora.models import Document, Sentence
from unpooled.service.submissions import actions as sub_actions
from unpooled.service.submissions.actions import do_ingest_submission, export_submission, load_kb
from unpooled.service.submissions.models import RelationInstance, Submission, SubmissionEntity

from ..conftest import FIXTURES

pytestmark = pytest.mark.django_db

KB = FIXTURES / "kb" / "coldstart.kb"
SOURCES = FIXTURES / "kb" / "sources.xml"


def table_counts() -> dict[str, int]:
    return {m._meta.label: m.objects.count() for m in apps.get_models()
            if m._meta.app_label in ("corpora", "submissions")}


@pytest.fixture
def tac_corpus():
    return do_load_corpus(SOURCES, "tac", "fixture", schema="tac-kbp")


def test_load_tac_corpus_keeps_raw_text(tac_corpus):
    assert tac_corpus.n_documents == 2
    doc = Document.objects.get(corpus=tac_corpus, doc_id="NYT_ENG_20130914.0094")
    assert doc.text.startswith("<DOC id=") and doc.text.rstrip().endswith("</DOC>")
    assert "&amp;" in doc.text
    assert Sentence.objects.filter(document=doc).count() >= 4
    for s in Sentence.objects.filter(document=doc):
        assert "<" not in doc.text[s.start:s.end]


def test_corpus_name_taken(tac_corpus):
    with pytest.raises(ActionError, match="already exists"):
        do_load_corpus(SOURCES, "tac", "fixture")


def test_ingest_stores_canonical_instances(tac_corpus):
    res = do_ingest_submission(KB, "fixture", "team-a", None, "tac")
    assert res.ok, res.report.to_dict()
    sub = res.submission
    assert sub.run_id == "fixture_run_1" and sub.team.name == "team-a"
    assert sub.counts["instances"] == 9 and sub.counts["entities"] == 7
    assert RelationInstance.objects.filter(submission=sub).count() == 9
    assert SubmissionEntity.objects.filter(submission=sub).count() == 7
    schema = tac_corpus.schema.schema()
    for pred in RelationInstance.objects.filter(submission=sub).values_list("predicate", flat=True):
        assert schema.relations[pred].canonical
    # the stored keys are the core's canonical keys
    kb, _ = read_tac(KB, InMemoryCorpus(iter_documents(SOURCES, "tac")), schema)
    assert set(RelationInstance.objects.values_list("key", flat=True)) == {i.key for i in kb.instances}


def test_indexes_exist(tac_corpus):
    with connection.cursor() as cur:
        idx = connection.introspection.get_constraints(cur, RelationInstance._meta.db_table)
    cols = {tuple(v["columns"]) for v in idx.values() if v["index"]}
    assert ("submission_id", "predicate") in cols
    assert ("submission_id", "subject_id") in cols
    assert ("document_id",) in cols
    assert ("key_hash",) in cols


@pytest.mark.parametrize("fmt", ["tac", "jsonl"])
def test_export_round_trip(tac_corpus, tmp_path, fmt):
    src = KB
    if fmt == "jsonl":
        first = do_ingest_submission(KB, "fixture", "seed", None, "tac").submission
        src = tmp_path / "seed.jsonl"
        with open(src, "w") as out:
            export_submission(first, "jsonl", out)
    sub = do_ingest_submission(src, "fixture", "team-b", "run-x", fmt).submission
    assert sub is not None
    out_path = tmp_path / f"export.{fmt}"
    with open(out_path, "w") as out:
        export_submission(sub, fmt, out)
    stored = load_kb(sub)
    Submission.objects.all().delete()  # the export may be byte-identical to the input: not a duplicate here
    again = do_ingest_submission(out_path, "fixture", "team-c", "run-y", fmt)
    assert again.ok, again.report.to_dict()
    assert again.report.n_warnings == 0
    round_tripped = load_kb(again.submission)
    assert round_tripped.instance_set() == stored.instance_set()
    assert len(round_tripped.instances) == 9
    assert {n: (e.type, e.links) for n, e in round_tripped.entities.items()} == {
        n: (e.type, e.links) for n, e in stored.entities.items()}


def test_rejected_submission_leaves_database_unchanged(tac_corpus, tmp_path):
    do_ingest_submission(KB, "fixture", "team-a", None, "tac")
    before = table_counts()
    bad = tmp_path / "bad.kb"
    bad.write_text(KB.read_text() + ":Carrie_Fisher\tper:spouse\t:Carrie_Fisher\tNYT_ENG_20130914.0094:0-10\n")
    res = do_ingest_submission(bad, "fixture", "team-new", "run-new", "tac")
    assert not res.ok and res.submission is None
    assert [d.code for d in res.report.errors] == ["UP206"]
    assert table_counts() == before


def test_crash_during_storage_leaves_no_rows(tac_corpus, monkeypatch):
    before = table_counts()
    real = sub_actions._bulk_insert
    calls = []

    def exploding(table, cols, rows):
        calls.append(table)
        n = real(table, cols, rows)
        if table == RelationInstance._meta.db_table:
            raise RuntimeError("worker killed")
        return n

    monkeypatch.setattr(sub_actions, "_bulk_insert", exploding)
    with pytest.raises(RuntimeError, match="worker killed"):
        do_ingest_submission(KB, "fixture", "team-a", None, "tac")
    assert RelationInstance._meta.db_table in calls
    assert table_counts() == before


def test_same_file_is_recognised_within_the_team(tac_corpus, tmp_path):
    """The same bytes again from the same team: its earlier submission. From another team: that team's own run
    (never the first team's id, counts, team or run: D8)."""
    first = do_ingest_submission(KB, "fixture", "team-a", None, "tac")
    gz_same = tmp_path / "copy.kb"
    gz_same.write_bytes(KB.read_bytes())
    again = do_ingest_submission(gz_same, "fixture", "team-a", "other", "tac")
    assert again.duplicate_of == first.submission and again.to_dict()["duplicate"] is True
    assert Submission.objects.count() == 1
    theirs = do_ingest_submission(gz_same, "fixture", "team-b", "other", "tac")
    assert theirs.ok and theirs.duplicate_of is None
    assert (theirs.submission.team.name, theirs.submission.run_id) == ("team-b", "other")
    out = theirs.to_dict()
    assert out["submission"] != first.submission.pk and out["team"] == "team-b" and out["duplicate"] is False
    assert Submission.objects.count() == 2


def test_same_run_name_refused(tac_corpus, tmp_path):
    do_ingest_submission(KB, "fixture", "team-a", None, "tac")
    other = tmp_path / "other.kb.gz"
    other.write_bytes(gzip.compress(KB.read_bytes()))
    with pytest.raises(ActionError, match="already has a run named 'fixture_run_1'"):
        do_ingest_submission(other, "fixture", "team-a", None, "tac")


def test_unknown_corpus_lists_known(tac_corpus):
    with pytest.raises(ActionError, match="unknown corpus 'nope' \\(corpora: fixture\\)"):
        do_ingest_submission(KB, "nope", "t", None, "tac")


def test_schema_conflict_refused(tmp_path):
    do_ensure_schema("tac-kbp")
    import json

    from unpooled.core.schema import builtin_schema

    d = builtin_schema("tac-kbp").to_dict()
    d["relations"][0]["description"] = "a different meaning"
    f = tmp_path / "s.json"
    f.write_text(json.dumps(d))
    with pytest.raises(ActionError, match="different schema named"):
        do_ensure_schema(str(f))


def test_db_corpus_view_matches_memory(tac_corpus):
    from unpooled.core.corpus import iter_documents

    mem = InMemoryCorpus(iter_documents(SOURCES, "tac"))
    view = DbCorpusView(tac_corpus, cache_size=1)  # exercise the per-document path
    for d in mem.ids:
        assert d in view and view.length(d) == mem.length(d)
        assert view.text(d) == mem.text(d)
        assert view.sentences(d) == mem.sentences(d)


def test_redocred_corpus(shared_data):
    corpus = do_load_corpus(shared_data / "redocred" / "dev_revised.json", "docred", "redocred-dev")
    assert corpus.n_documents == 500
    assert corpus.schema.name == builtin_name("docred")
    from unpooled.service.corpora.models import GoldEntity, GoldMention, GoldRelation

    assert corpus.n_gold_relations == GoldRelation.objects.filter(document__corpus=corpus).count() > 10000
    assert GoldEntity.objects.filter(document__corpus=corpus).count() > 9000
    # mentions resolve into the stored text
    m = GoldMention.objects.select_related("document", "entity").filter(document__corpus=corpus).first()
    assert m.document.text[m.start:m.end].strip() != ""
    assert m.document.text == " ".join(" ".join(s) for s in _first_doc_tokens(shared_data)) or m.document.pk != \
        Document.objects.filter(corpus=corpus).first().pk


def _first_doc_tokens(shared_data):
    import json

    return json.loads((shared_data / "redocred" / "dev_revised.json").read_text())[0]["sents"]


def builtin_name(name: str) -> str:
    from unpooled.core.schema import builtin_schema

    return builtin_schema(name).name


def test_demo_loads_real_submission(shared_data):
    from unpooled.demo import DEMO_CORPUS, load_demo

    msgs = []
    load_demo(echo=msgs.append)
    sub = Submission.objects.get(corpus__name=DEMO_CORPUS, team__name="DocRED-original")
    dev = {d.id for d in iter_documents(shared_data / "redocred" / "dev_revised.json", "docred")}
    expected = sum(len({(r.subject, r.predicate, r.object) for r in d.relations})
                   for d in iter_documents(shared_data / "docred_hwe" / "dev_keys_new.json", "docred") if d.id in dev)
    assert expected > 3000
    assert sub.counts["instances"] == expected, sub.counts
    base = Submission.objects.get(corpus__name=DEMO_CORPUS, team__name="spaCy-baseline")
    assert base.counts["instances"] > 300
    assert load_demo(echo=msgs.append) == [DEMO_CORPUS]  # idempotent
    assert Submission.objects.count() == 2


#: text the bulk insert must store as given: PostgreSQL's COPY text format gives tab, newline, carriage return and
#: backslash a meaning (and ``\N`` is its NULL), SQL quotes, non-ASCII and an astral character
AWKWARD = 'tab\there, line\nbreak\r, back\\slash, \\N, \\t, "quoted" \'single\', caf\u00e9 \u4e2d\u6587 \U0001F600'


def test_bulk_store_keeps_awkward_text_and_nulls(tac_corpus, tmp_path):
    """The bulk insert (COPY on PostgreSQL, executemany on SQLite: the suite runs on both) stores exactly the
    validated KB: every column of every entity, mention and instance, awkward text unchanged, NULL where the KB
    has none (an untyped entity, a string filler's object)."""
    import json

    doc = "NYT_ENG_20130914.0094"
    rows = [
        {"doc": doc, "subject": {"start": 98, "end": 111, "entity": ":Carrie\t" + AWKWARD, "link": AWKWARD},
         "predicate": "per:title", "object": {"start": 117, "end": 124, "value": AWKWARD},
         "provenance": [{"start": 98, "end": 172}], "confidence": 0.9},
        {"doc": doc, "subject": {"start": 98, "end": 111, "entity": ":Carrie\t" + AWKWARD, "type": "PER"},
         "predicate": "per:city_of_birth", "object": {"start": 158, "end": 171, "entity": "\\N"},
         "confidence": 0.25},
    ]
    path = tmp_path / "awkward.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = do_ingest_submission(path, "fixture", "team-a", "awkward", "jsonl")
    assert res.ok, res.report.to_dict()
    kb, _ = sub_actions.check_submission(path, tac_corpus, "jsonl")
    sub = res.submission
    ents = {e.pk: e for e in SubmissionEntity.objects.filter(submission=sub)}
    assert sorted((e.name, e.type, e.links) for e in ents.values()) == sorted(
        (e.name, e.type, e.links) for e in kb.entities.values())
    assert {e.name: e.type for e in ents.values()}["\\N"] is None
    docs = dict(Document.objects.filter(corpus=tac_corpus).values_list("pk", "doc_id"))
    stored_m = [(ents[m.entity_id].name, docs[m.document_id], m.start, m.end, m.kind, m.canonical, m.confidence)
                for m in sub.mentions.order_by("pk")]
    assert stored_m == [(m.entity, m.doc, m.start, m.end, m.kind, m.canonical, m.confidence) for m in kb.mentions]
    stored_i = [(docs[i.document_id], ents[i.subject_id].name, i.subject_start, i.subject_end, i.predicate,
                 ents[i.object_id].name if i.object_id is not None else None, i.object_start, i.object_end, i.value,
                 sub_actions.parse_provenance(i.provenance), i.confidence, i.line, i.key, i.key_hash)
                for i in RelationInstance.objects.filter(submission=sub).order_by("pk")]
    assert stored_i == [(i.doc, i.subject, i.subject_start, i.subject_end, i.predicate, i.object, i.object_start,
                         i.object_end, i.value, i.provenance, i.confidence, i.line, i.key, key_hash(i.key))
                        for i in kb.instances]
    assert [v for v, in RelationInstance.objects.filter(submission=sub).values_list("value").order_by("pk")] == [
        AWKWARD, None]
