"""The corpus's recall protocol (issue 24 item 4): within-sentence (the default) or document-level.

The setting decides which pairs the exhaustive relations task asks about, which layers recall's truth reads,
how a pooled instance matches a true fact, and every page and payload says which protocol a number follows.
"""

from __future__ import annotations

import csv
import io

import pytest

from unpooled.service.annotation import actions
from unpooled.service.annotation.models import Kind, Task

from ..conftest import load_redocred_subset
from .test_truth import _submit, _tiny_corpus

pytestmark = [pytest.mark.django_db, pytest.mark.engine_neutral]


def test_the_protocol_decides_the_true_recall(tmp_path):
    from unpooled.service.evaluations.truth import protocol_gold, true_scores

    corpus = _tiny_corpus(tmp_path)
    sub = _submit(tmp_path, "tiny", "hand", [
        ("Alice", "A", "P19", "Paris", "P"),   # within s0
        ("Acme", "C", "P159", "Paris", "P"),   # across sentences
        ("Acme", "C", "P571", "1990", "Y"),    # within s1
    ])
    within = true_scores(corpus, sub)
    assert (within.gold, within.found) == (3, 2)          # the cross-sentence fact earns nothing
    assert actions.do_set_recall_protocol(corpus, "document") == 0  # no relations task yet
    gold = protocol_gold(corpus)
    # every pair of the document's clusters is asked: the cross-sentence fact is found, at first mentions
    assert sorted((g.predicate, g.s_start, g.o_start) for g in gold) == [("P112", 38, 0), ("P159", 38, 18),
                                                                        ("P19", 0, 18), ("P571", 38, 46)]
    doc = true_scores(corpus, sub)
    assert (doc.gold, doc.found) == (4, 3) and doc.r == pytest.approx(3 / 4)
    # "She" founded Acme is the fact (Acme, P112, Alice) through another mention of Alice's cluster
    she = _submit(tmp_path, "tiny", "she", [("Acme", "C", "P112", "She", "A")])
    assert true_scores(corpus, she).found == 1
    from unpooled.service.evaluations.rates import recall_protocol

    assert recall_protocol(corpus) == "document"


def test_console_refuses_document_recall_without_entity_clusters(tmp_path):
    import json

    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.organiser import console

    path = tmp_path / "plain.jsonl"
    path.write_text(json.dumps({"id": "d1", "text": "Alice was born in Paris."}) + "\n")
    corpus = do_load_corpus(path, "jsonl", "plain")
    values = {**console.current_settings(corpus), "recall_protocol": "document"}
    with pytest.raises(console.SettingsError, match="recall_protocol: document-level recall counts facts between "
                                                    "the corpus's entity clusters, and corpus plain has none"):
        console.check_settings(corpus, values)
    with pytest.raises(console.SettingsError, match="recall_protocol: expected one of sentence, document, got 'x'"):
        console.check_settings(corpus, {**values, "recall_protocol": "x"})


def test_switching_the_protocol_rescores_recall_and_every_view_says_so(shared_data, tmp_path, client, capsys):
    """The corpus's own gold (every fact, cross-sentence ones included) submitted as a system, beside a copy kept
    within sentences: under the within-sentence protocol both have the same recall; switched to document-level
    the sampled documents are asked again over every cluster pair, recall is re-scored and the gold's rises to
    about 1 while the within-sentence copy's falls; the leaderboard, the submission page, the API and the CSV name
    the protocol of each number."""
    from unpooled.core.estimators.exhaustive import within_sentence
    from unpooled.core.matching import InstanceRef
    from unpooled.service.crowd.simulated import SimulatedCrowd
    from unpooled.service.evaluations import publish
    from unpooled.service.evaluations.models import Score
    from unpooled.service.evaluations.rates import sentences
    from unpooled.service.evaluations.tasks import evaluate_corpus
    from unpooled.service.organiser import console
    from unpooled.service.submissions.actions import do_ingest_submission

    corpus, gold, path = load_redocred_subset(shared_data, tmp_path, 12, "proto", team="gold", run="all")
    split = sentences(corpus)
    kept = tmp_path / "within.jsonl"
    import json

    with open(tmp_path / "proto.jsonl") as f, open(kept, "w") as out:
        for line in f:
            r = json.loads(line)
            ref = InstanceRef(r["doc"], r["subject"]["start"], r["subject"]["end"], r["predicate"],
                              r["object"]["start"], r["object"]["end"])
            if within_sentence(ref, split):
                out.write(line)
    within = do_ingest_submission(kept, "proto", "within", "run", "jsonl").submission
    evaluate_corpus.call("proto", accuracy=1.0, labels=60, documents=6, seed=0, levels=["instance"], controls=0)

    def newest(sub):
        return Score.objects.filter(submission=sub, level="instance").order_by("-id").first()

    before = {s: newest(s) for s in (gold, within)}
    assert {s.recall_protocol for s in before.values()} == {"sentence"}
    assert before[gold].r == pytest.approx(before[within].r, abs=0.02)

    rel = Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="").count()
    assert rel == 6
    console.do_update_settings(corpus, {**console.current_settings(corpus), "recall_protocol": "document"})
    # the within-sentence layers are set aside, not deleted; the documents are asked again over every cluster pair
    assert Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="protocol:sentence").count() == 6
    fresh = Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="")
    assert fresh.count() == 6 and all(t.payload["protocol"] == "document" for t in fresh)
    assert sum(len(t.payload["pairs"]) for t in fresh) > sum(
        len(t.payload["pairs"]) for t in Task.objects.filter(corpus=corpus, key="protocol:sentence"))
    SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0).run(kinds=["relations"])
    publish.rescore_all(corpus)
    after = {s: newest(s) for s in (gold, within)}
    assert {s.recall_protocol for s in after.values()} == {"document"}
    # the cached path gives the from-scratch (core offline.score) numbers under the document protocol too
    from unpooled.service.evaluations import scoring

    cached, scratch = scoring.score(corpus), scoring.from_scratch(corpus)
    assert cached.result.options["recall_protocol"] == scratch.result.options["recall_protocol"] == "document"
    assert scoring.max_abs_difference(cached.result, scratch.result) < 1e-9
    assert after[gold].r > 0.95 and after[gold].r_hi >= 0.999
    assert after[within].r < after[gold].r - 0.2
    with capsys.disabled():
        print("\nrecall " + "; ".join(f"{p}: " + ", ".join(
            f"{n} {x[s].r:.3f} [{x[s].r_lo:.3f}, {x[s].r_hi:.3f}] true {x[s].details['truth']['r']:.3f}"
            for n, s in (("gold", gold), ("within", within))) for p, x in (("within-sentence", before),
                                                                            ("document-level", after))))
    # the truth: every fact of the corpus (a few are lost where two clusters share a mention's span)
    assert after[gold].details["truth"]["r"] > 0.98

    page = client.get("/corpora/proto/leaderboard/").content.decode()
    assert "recall: document-level" in page and 'id="recall-protocol-note"' in page
    sub_page = client.get(f"/submissions/{gold.pk}/").content.decode()
    assert "recall: document-level" in sub_page
    api = client.get("/api/corpora/proto/leaderboard").json()
    assert api["recall_protocol"] == "document"
    assert {r["score"]["recall_protocol"] for r in api["rows"]} == {"document"}
    scores = client.get(f"/api/submissions/{gold.pk}/scores").json()
    assert scores["scores"]["instance"]["recall_protocol"] == "document"
    got = list(csv.DictReader(io.StringIO(client.get("/corpora/proto/leaderboard.csv").content.decode())))
    assert {r["recall_protocol"] for r in got} == {"document"}

    # and back: the within-sentence layers come back as they were (nothing is asked twice)
    console.do_update_settings(corpus, {**console.current_settings(corpus), "recall_protocol": "sentence"})
    assert not Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="", status=Task.Status.OPEN).exists()
    publish.rescore_all(corpus)
    assert newest(gold).recall_protocol == "sentence"
    assert newest(gold).r == pytest.approx(before[gold].r, abs=1e-9)
