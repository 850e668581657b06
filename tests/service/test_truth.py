"""True P/R/F1 from the gold layer (the estimands of ``score_corpus``), and the demo's truth beside its estimates."""

from __future__ import annotations

import json

import pytest

from unpooled.service.submissions.actions import do_ingest_submission

from ..conftest import load_redocred_subset

pytestmark = [pytest.mark.django_db, pytest.mark.engine_neutral]  # true scores: arithmetic over ORM rows

# A hand-made Re-DocRED-style document: two sentences, four entities ("She" is Alice again).
#   s0: "Alice was born in Paris ."      s1: "She founded Acme in 1990 ."
# Character offsets (tokens joined by single spaces):
#   Alice 0-5, Paris 18-23, She 26-29, Acme 38-42, 1990 46-50
TOKENS = [["Alice", "was", "born", "in", "Paris", "."], ["She", "founded", "Acme", "in", "1990", "."]]
VERTICES = [
    [{"name": "Alice", "pos": [0, 1], "sent_id": 0, "type": "PER"}, {"name": "She", "pos": [0, 1], "sent_id": 1, "type": "PER"}],
    [{"name": "Paris", "pos": [4, 5], "sent_id": 0, "type": "LOC"}],
    [{"name": "Acme", "pos": [2, 3], "sent_id": 1, "type": "ORG"}],
    [{"name": "1990", "pos": [4, 5], "sent_id": 1, "type": "TIME"}],
]
LABELS = [
    {"h": 0, "t": 1, "r": "P19", "evidence": [0]},      # Alice born in Paris: within s0
    {"h": 2, "t": 0, "r": "P112", "evidence": [1]},     # Acme founded by Alice: within s1 ("She")
    {"h": 2, "t": 3, "r": "P571", "evidence": [1]},     # Acme inception 1990: within s1
    {"h": 2, "t": 1, "r": "P159", "evidence": [0, 1]},  # Acme headquarters Paris: across sentences
]
SPAN = {"Alice": (0, 5), "Paris": (18, 23), "She": (26, 29), "Acme": (38, 42), "1990": (46, 50)}


def _tiny_corpus(tmp_path, name="tiny"):
    from unpooled.service.corpora.actions import do_load_corpus

    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps([{"title": "d1", "sents": TOKENS, "vertexSet": VERTICES, "labels": LABELS}]))
    return do_load_corpus(path, "docred", name)


def _submit(tmp_path, corpus_name, team, rows):
    path = tmp_path / f"{team}.jsonl"
    with open(path, "w") as out:
        for subj, ent_s, pred, obj, ent_o in rows:
            s, o = SPAN[subj], SPAN[obj]
            out.write(json.dumps({"doc": "d1", "predicate": pred,
                                  "subject": {"start": s[0], "end": s[1], "entity": ent_s},
                                  "object": {"start": o[0], "end": o[1], "entity": ent_o}}) + "\n")
    res = do_ingest_submission(path, corpus_name, team, "run", "jsonl")
    assert res.ok, res.report.to_dict()
    return res.submission


def test_known_small_case_by_hand(tmp_path):
    from unpooled.service.evaluations.truth import protocol_gold, true_precision, true_scores

    corpus = _tiny_corpus(tmp_path)
    gold = protocol_gold(corpus)
    # the protocol finds the three within-sentence facts, at the first mention of each entity in the sentence
    assert sorted((g.predicate, g.s_start, g.o_start) for g in gold) == [("P112", 38, 26), ("P19", 0, 18),
                                                                        ("P571", 38, 46)]
    sub = _submit(tmp_path, "tiny", "hand", [
        ("Alice", "A", "P19", "Paris", "P"),   # right, found by the protocol
        ("Acme", "C", "P159", "Paris", "P"),   # right, but across sentences: no recall credit
        ("Alice", "A", "P20", "Paris", "P"),   # wrong
        ("Acme", "C", "P571", "1990", "Y"),    # right, found by the protocol
        ("She", "A", "P20", "Paris", "P"),     # wrong (same subject entity A)
    ])
    ts = true_scores(corpus, sub)
    assert (ts.instances, ts.correct, ts.gold, ts.found) == (5, 3, 3, 2)
    assert ts.p == pytest.approx(3 / 5) and ts.r == pytest.approx(2 / 3)
    assert ts.f1 == pytest.approx(2 * 0.6 * (2 / 3) / (0.6 + 2 / 3))
    # relation level: P19 1/1, P159 1/1, P20 0/2, P571 1/1 -> 3/4; entity level: A 1/3, C 2/2 -> 2/3
    assert true_scores(corpus, sub, level="relation").p == pytest.approx(3 / 4)
    assert true_scores(corpus, sub, level="entity").p == pytest.approx((1 / 3 + 1) / 2)
    assert true_precision(corpus, sub.pk) == pytest.approx(3 / 5)
    assert true_precision(corpus, sub.pk, level="entity") == pytest.approx(2 / 3)
    # overlap matching: a shifted subject span that still overlaps the protocol's mention counts
    shifted = _submit(tmp_path, "tiny", "shift", [("Alice", "A", "P19", "Paris", "P")])
    assert true_scores(corpus, shifted).found == 1


def test_gold_made_submission_scores_one_and_matches_the_exhaustive_protocol(shared_data, tmp_path):
    """A submission of the protocol's own facts scores 1/1/1, and error-free annotators exhaustively
    annotating every document produce exactly those facts (the truth is what Y0 samples)."""
    from unpooled.service.annotation.sampling import sample_documents
    from unpooled.service.crowd.simulated import SimulatedCrowd
    from unpooled.service.evaluations.inputs import exhaustive_truth
    from unpooled.service.evaluations.truth import protocol_gold, true_scores, true_scores_all

    corpus, docred, _ = load_redocred_subset(shared_data, tmp_path, 12, "goldmade")
    gold = protocol_gold(corpus)
    assert len(gold) > 50
    path = tmp_path / "gold.jsonl"
    with open(path, "w") as out:
        for g in gold:
            out.write(json.dumps({"doc": g.doc, "predicate": g.predicate,
                                  "subject": {"start": g.s_start, "end": g.s_end, "entity": f"{g.doc}/{g.s_start}"},
                                  "object": {"start": g.o_start, "end": g.o_end, "entity": f"{g.doc}/{g.o_start}"}})
                      + "\n")
    res = do_ingest_submission(path, "goldmade", "protocol", "gold", "jsonl")
    assert res.ok, res.report.to_dict()
    for level in ("instance", "relation", "entity"):
        ts = true_scores(corpus, res.submission, level=level, gold=gold)
        assert ts.correct == ts.instances == ts.found == ts.gold == len(gold), level
        assert (ts.p, ts.r, ts.f1) == (pytest.approx(1.0), 1.0, pytest.approx(1.0)), level
    # the corpus's own (document-level) gold as a submission: every instance is right, but its
    # cross-sentence facts earn no recall, so recall is below 1
    allgold = true_scores_all(corpus)[docred.pk]
    assert allgold.correct == allgold.instances and 0.3 < allgold.r < 1.0

    sample_documents(corpus, "uniform", corpus.n_documents, seed=0)
    crowd = SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0)
    crowd.run(kinds=["entities", "relations"])
    truth, docs = exhaustive_truth(corpus)
    assert docs == corpus.n_documents
    assert sorted(t.key for t in truth) == sorted(g.key for g in gold)


def test_truth_beside_the_estimates_end_to_end(shared_data, tmp_path, capsys, client):
    """The demo's pipeline on a Re-DocRED subset: truth columns, Score.details, and the truth inside
    the 90% intervals (fixed seeds; the count is printed)."""
    from unpooled.cli.main import main
    from unpooled.service.evaluations.models import Score
    from unpooled.service.evaluations.tasks import evaluate_corpus

    from .test_annotation_e2e import _system_jsonl

    corpus, gold_sub, path = load_redocred_subset(shared_data, tmp_path, 40, "truthe2e", team="gold", run="all",
                                                  control_share=0.1)
    noisy_path = tmp_path / "noisy.jsonl"
    _system_jsonl(path, noisy_path, rng=3, keep=0.4)
    do_ingest_submission(noisy_path, "truthe2e", "noisy", "run-1", "jsonl")

    out = evaluate_corpus.call("truthe2e", accuracy=0.8, labels=80, documents=10, seed=0, levels=["instance"])
    rows = out["rows"]
    assert len(rows) == 2 and out["truth_inside"][1] == 6
    for r in rows:
        assert {"p_true", "r_true", "f1_true"} <= set(r)
        s = Score.objects.filter(submission_id=r["submission"]).first()
        assert s.details["truth"]["p"] == pytest.approx(r["p_true"])
        # the scores come from the votes: the labelled-sample figures, the crowd's rates and the variance by source
        # are kept beside them, and the submission page shows them
        smp, rates = s.details["sample"], s.details["crowd_rates"]
        assert all(0 <= smp[k] <= 1 for k in ("p", "r", "f1")) and 0.5 < rates["sens"] < 1 and 0 < rates["fpr"] < 0.5
        assert set(s.details["variance"]) == {"design", "votes", "rates"}
        assert s.p_lo <= s.p <= s.p_hi and 0 <= s.p_lo and s.p_hi <= 1
        html = client.get(f"/submissions/{r['submission']}/").content.decode()
        raw = html.split('id="raw-figures"')[1].split("</details>")[0]
        assert "every majority label taken as certain" in raw and f"P {smp['p']:.3f}" in raw
        assert "corrected for annotator error" in html and f"sensitivity {rates['sens']:.2f}" in html
    k, n = out["truth_inside"]
    with capsys.disabled():
        print(f"\ntruth inside the 90% interval: {k} of {n}; " + "; ".join(
            f"{r['team']}: P {r['p']:.3f} [{r['p_lo']:.3f}, {r['p_hi']:.3f}] true {r['p_true']:.3f}, "
            f"R {r['r']:.3f} [{r['r_lo']:.3f}, {r['r_hi']:.3f}] true {r['r_true']:.3f}" for r in rows))
    # a calibrated 90% interval misses about one pair in ten, and a system's R and F1 miss together when the
    # document sample is unrepresentative; 4 of 6 is the bar a calibrated method clears (~95% of seeds) and
    # the former scoring did not (over 25 simulated runs its intervals held the truth for 1 pair in 6 at >= 80%)
    assert k >= 4

    # the CLI prints the truth column and the count (the scores of the run above are reused)
    code = main(["evaluate", "--corpus", "truthe2e", "--json"])
    got = json.loads(capsys.readouterr().out)
    assert code == 0 and all({"p_true", "r_true", "f1_true"} <= set(r) for r in got)
    code = main(["evaluate", "--corpus", "truthe2e"])
    text = capsys.readouterr().out
    assert code == 0 and "true P/R/F1" in text and "truth inside the 90% interval:" in text


def test_truth_is_read_in_bulk_and_computed_once_per_submission(shared_data, tmp_path):
    """A whole corpus's truth costs the same few queries at 12 documents as at 4 (the gold layer is read a chunk of
    documents at a time, not a document at a time); a second re-scoring's truth reads no instance nor gold row
    again, and gives the same figures; a new submission's truth is computed beside the memoised ones."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from unpooled.service.crowd.simulated import GoldOracle
    from unpooled.service.evaluations.truth import clear_cache, protocol_gold, true_scores, true_scores_all

    corpus, docred, _ = load_redocred_subset(shared_data, tmp_path, 12, "memo")
    queries = []
    for docs in (4, 12):
        some = list(corpus.documents.order_by("id").values_list("pk", flat=True)[:docs])
        with CaptureQueriesContext(connection) as q:
            protocol_gold(corpus, documents=some, oracle=GoldOracle(corpus))
        queries.append(len(q))
    assert queries[0] == queries[1] < 12
    clear_cache()
    first = true_scores_all(corpus)
    assert first[docred.pk] == true_scores(corpus, docred.pk)
    with CaptureQueriesContext(connection) as q:
        again = true_scores_all(corpus)
    assert again == first
    assert not [x for x in q.captured_queries if "relationinstance" in x["sql"] or "goldmention" in x["sql"]]
    path = tmp_path / "half.jsonl"
    rows = [json.loads(x) for x in open(tmp_path / "memo.jsonl")][::2]  # the corpus's gold KB, every other line
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = do_ingest_submission(path, "memo", "half", "run", "jsonl")
    assert res.ok, res.report.to_dict()
    assert list(true_scores_all(corpus, submissions=[docred.pk])) == [docred.pk]  # the rows' submissions only
    both = true_scores_all(corpus)
    assert both[docred.pk] == first[docred.pk] and both[res.submission.pk] == true_scores(corpus, res.submission)
    assert 0 < both[res.submission.pk].instances <= len(rows) < first[docred.pk].instances
