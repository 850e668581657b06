"""The submission page: scores, per-relation and per-type breakdowns, error analysis, downloads, permissions.

A small world on real Re-DocRED documents: two overlapping submissions with typed subjects
and provenance, draws at two levels, majority labels written from the gold layer (some keys
left unlabelled), and three exhaustively annotated documents with unequal inclusion
probabilities.  The breakdown numbers are recomputed here by hand (plain Python over the
database rows: importance weights at the instance level, inclusion-weighted overlap
matching), independently of the core's vectorised code.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils import timezone

from unpooled.core.corpus import iter_documents
from unpooled.service.accounts.models import Profile, Role
from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Label, Task
from unpooled.service.corpora.actions import do_load_corpus
from unpooled.service.corpora.models import GoldRelation
from unpooled.service.crowd.simulated import GoldOracle
from unpooled.service.evaluations import breakdown
from unpooled.service.evaluations.models import Draw, Score
from unpooled.service.submissions.actions import do_ingest_submission
from unpooled.service.submissions.models import RelationInstance, Submission

pytestmark = pytest.mark.django_db

N_DOCS = 8
EXHAUSTIVE = {0: 0.5, 2: 0.25, 5: 0.5}  # document index -> inclusion probability


def _system(path_in, out_path, *, rng, keep):
    """Part of the gold relations and as many wrong ones, subjects typed, provenance = the subject's sentence."""
    rng = np.random.default_rng(rng)
    with open(out_path, "w", encoding="utf-8") as out:
        for doc in iter_documents(path_in, "docred"):
            ents = doc.entities
            holds = defaultdict(set)
            for r in doc.relations:
                holds[(r.subject, r.object)].add(r.predicate)
            preds = sorted({r.predicate for r in doc.relations})
            rows = [(r.subject, r.predicate, r.object) for r in doc.relations if rng.random() < keep]
            for _ in range(len(rows)):
                h, t = (int(x) for x in rng.choice(len(ents), size=2, replace=False))
                wrong = [p for p in preds if p not in holds[(h, t)]]
                if wrong:
                    rows.append((h, wrong[int(rng.integers(len(wrong)))], t))
            seen = set()
            for h, pred, t in rows:
                if (h, pred, t) in seen:
                    continue
                seen.add((h, pred, t))
                a, b = ents[h].mentions[0], ents[t].mentions[0]
                s0, s1 = doc.sentences[a.sentence]
                out.write(json.dumps({
                    "doc": doc.id, "predicate": pred,
                    "subject": {"start": a.start, "end": a.end, "entity": f"{doc.id}/{h}", "type": ents[h].type},
                    "object": {"start": b.start, "end": b.end, "entity": f"{doc.id}/{t}", "type": ents[t].type},
                    "provenance": [{"start": s0, "end": s1}]}) + "\n")


def _label_draws(corpus, oracle):
    """A majority label for every drawn key but every fifth (sorted), from the gold layer."""
    keys = {}
    for inst in (RelationInstance.objects.filter(pk__in=Draw.objects.values("instance_id"))
                 .only("key", "key_hash", "document_id", "subject_start", "subject_end", "predicate",
                       "object_start", "object_end")):
        keys.setdefault(inst.key, inst)
    for n, key in enumerate(sorted(keys)):
        if n % 5 == 4:
            continue
        i = keys[key]
        t = Task(document_id=i.document_id, kind=Kind.VERIFY, payload={
            "subject": {"start": i.subject_start, "end": i.subject_end}, "predicate": i.predicate,
            "object": {"start": i.object_start, "end": i.object_end}})
        ok = oracle.verify(t)
        Label.objects.create(corpus=corpus, key=key, key_hash=i.key_hash, probability=2 / 3 if ok else 1 / 3,
                             correct=ok, method="majority", n_answers=3, guideline_version="test")


def _exhaustive(corpus, oracle):
    """Complete relation tasks for three documents: gold mentions, gold relations between first mentions."""
    docs = list(corpus.documents.order_by("id"))
    now = timezone.now()
    for idx, inclusion in EXHAUSTIVE.items():
        doc = docs[idx]
        ExhaustiveDocument.objects.create(corpus=corpus, document=doc, scheme="uniform", inclusion=inclusion)
        mentions = oracle.mentions(doc.pk)
        first = {}
        for k, m in enumerate(mentions):
            first.setdefault(m["cluster"], k)
        rels = [[first[s], p, first[o]] for s, p, o in GoldRelation.objects.filter(document=doc)
                .values_list("subject_id", "predicate", "object_id") if s in first and o in first]
        Task.objects.create(corpus=corpus, kind=Kind.RELATIONS, document=doc, key="", status=Task.Status.COMPLETE,
                            payload={"mentions": mentions, "pairs": []}, result={"pairs": {}, "relations": rels},
                            answers_needed=0, priority=now, guideline_version="test", completed=now)


@pytest.fixture
def world(shared_data, tmp_path):
    return make_world(shared_data, tmp_path)


def make_world(shared_data, tmp_path):
    """Two scored submissions of teams ``team-a`` and ``team-b`` on ``N_DOCS`` documents (see the module)."""
    from unpooled.service.evaluations.draws import draw
    from unpooled.service.evaluations.publish import score_corpus

    data = json.loads((shared_data / "redocred" / "dev_revised.json").read_text())[:N_DOCS]
    path = tmp_path / "bd.json"
    path.write_text(json.dumps(data))
    corpus = do_load_corpus(path, "docred", "bdpage")
    subs = {}
    for team, rng, keep in (("team-a", 1, 0.6), ("team-b", 2, 0.5)):
        out = tmp_path / f"{team}.jsonl"
        _system(path, out, rng=rng, keep=keep)
        res = do_ingest_submission(out, corpus.name, team, "run-1", "jsonl")
        assert res.ok, res.report.to_dict()
        subs[team] = res.submission
    draw(subs["team-a"], 50, level="instance", rng=10)
    draw(subs["team-b"], 40, level="instance", rng=11)
    draw(subs["team-a"], 20, level="relation", rng=12)
    oracle = GoldOracle(corpus)
    _label_draws(corpus, oracle)
    _exhaustive(corpus, oracle)
    score_corpus(corpus, level="instance")
    score_corpus(corpus, level="relation")
    return corpus, subs["team-a"], subs["team-b"]


def _stale(corpus, level="instance"):
    """The newest scores at ``level`` say other counts than a scoring now would (the same figures): the next scoring
    writes a new score for each (one with nothing new writes none: it would repeat the newest)."""
    from django.db.models import F

    Score.objects.filter(pk__in=[s.pk for s in breakdown.newest_scores_of_corpus(corpus, level).values()]).update(
        labels_reused=F("labels_reused") + 1)


def _user(name, *, team=None, staff=False):
    u = get_user_model().objects.create_user(name, password="pw", is_staff=staff)
    if not staff:
        Profile.objects.create(user=u, role=Role.SUBMITTER, team=team)
    return u


# -- hand computation --------------------------------------------------------------------
def _overlap(a0, a1, b0, b1):
    return a0 < b1 and b0 < a1


def _truth(corpus):
    """(doc_id, subject span, predicate, object span, subject type, weight) of every true instance, once per key."""
    out, seen = [], set()
    for t in Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS).select_related("document"):
        inc = ExhaustiveDocument.objects.get(corpus=corpus, document=t.document).inclusion
        ms = t.payload["mentions"]
        for a, p, b in t.result["relations"]:
            k = (t.document.doc_id, ms[a]["start"], ms[a]["end"], p, ms[b]["start"], ms[b]["end"])
            if k not in seen:
                seen.add(k)
                out.append((*k, ms[a]["type"], 1 / inc))
    return out


def _hand(sub, others, corpus, level="instance"):
    """Per-relation and per-subject-type precision (with the Hajek standard error) and recall, by hand."""
    def rows(s):
        return list(RelationInstance.objects.filter(submission=s).select_related("document", "subject"))

    mine = rows(sub)
    systems = [sub, *others]
    size = {s.pk: RelationInstance.objects.filter(submission=s).count() for s in systems}
    member = {s.pk: set(RelationInstance.objects.filter(submission=s).values_list("key", flat=True)) for s in systems}
    labels = {}
    for lab in Label.objects.filter(corpus=corpus, method="majority").order_by("id"):
        labels[lab.key] = float(lab.correct)
    draws = [(d.submission_id, d.key) for d in Draw.objects.filter(submission__in=systems, level=level).order_by("id")
             if d.key in labels]
    n = {s.pk: sum(1 for j, _ in draws if j == s.pk) for s in systems}
    pred_of = {i.key: i.predicate for i in mine}
    type_of = {i.key: i.subject.type for i in mine}

    def p_of(j, key):  # instance level: uniform over the system's instances
        return 1 / size[j] if key in member[j] else 0.0

    # each system's draws count over the distinct instances they reached (one cell at the instance level): a draw
    # weighs n_j / (k_j * its instance's draws in j) (estimators/finite.py)
    times = defaultdict(int)
    for j, k in draws:
        times[j, k] += 1
    distinct = {s.pk: sum(1 for (j, _k) in times if j == s.pk) for s in systems}
    w = [p_of(sub.pk, k) / sum(n[j.pk] * p_of(j.pk, k) for j in systems) * n[j0] / (distinct[j0] * times[j0, k])
         for j0, k in draws]
    out = {}
    for name, group_of in (("relation", pred_of), ("type", type_of)):
        C, D = defaultdict(float), defaultdict(float)
        for (j, k), ws in zip(draws, w):
            if ws > 0:
                C[group_of[k]] += ws * labels[k]
                D[group_of[k]] += ws
        p = {g: C[g] / D[g] for g in D}
        # Hajek variance: influence u_s = w_s (f_s - p_g) / D_g, stratified by the drawing system, over its
        # distinct instances (a_x: the sum of u_s over x's draws) with the finite-population correction 1 - k/N
        var = defaultdict(float)
        for g in p:
            for s in systems:
                a = defaultdict(float)
                for (j, k), ws in zip(draws, w):
                    if j == s.pk:
                        a[k] += ws * (labels[k] - p[g]) / D[g] if ws > 0 and group_of[k] == g else 0.0
                kk = len(a)
                if kk > 1:
                    mean = sum(a.values()) / kk
                    var[g] += (1 - kk / size[s.pk]) * kk / (kk - 1) * sum((x - mean) ** 2 for x in a.values())
        out[name] = {"p": p, "se": {g: math.sqrt(v) for g, v in var.items()}, "mass_hat": dict(D)}
    truth = _truth(corpus)
    found = [any(i.document.doc_id == t[0] and i.predicate == t[3] and _overlap(i.subject_start, i.subject_end,
                                                                                t[1], t[2])
                 and _overlap(i.object_start, i.object_end, t[4], t[5]) for i in mine) for t in truth]
    for name, key in (("relation", 3), ("type", 6)):
        V, A = defaultdict(float), defaultdict(float)
        for t, f in zip(truth, found):
            V[t[key]] += t[7]
            A[t[key]] += t[7] * f
        out[name]["r"] = {g: A[g] / V[g] for g in V}
    out["missed"] = [t for t, f in zip(truth, found) if not f]
    out["recall_all"] = sum(t[7] * f for t, f in zip(truth, found)) / sum(t[7] for t in truth)
    return out


def test_breakdown_matches_hand_computation(world, client):
    corpus, a, b = world
    staff = _user("org", staff=True)
    client.force_login(staff)
    resp = client.get(reverse("web:submission", args=[a.pk]))
    assert resp.status_code == 200
    html = resp.content.decode()
    score = Score.objects.filter(submission=a, level="instance").latest("id")
    bd = breakdown.stored(score)
    assert bd is not None and bd["level"] == "instance" and bd["estimator"] == "joint/balance/overlap"
    hand = _hand(a, [b], corpus)
    rel = {r["group"]: r for r in bd["relation"]}
    typ = {r["group"]: r for r in bd["entity_type"]}
    # every relation the submission predicted or the exhaustive documents hold has a row
    preds = set(RelationInstance.objects.filter(submission=a).values_list("predicate", flat=True))
    assert set(rel) == preds | {t[3] for t in _truth(corpus)}
    assert set(hand["relation"]["p"]) and set(hand["type"]["p"])
    for got, h in ((rel, hand["relation"]), (typ, hand["type"])):
        for g, row in got.items():
            if g in h["p"]:
                assert row["p"] == pytest.approx(min(1.0, max(0.0, h["p"][g])), abs=1e-9), g
                assert row["p_se"] == pytest.approx(h["se"][g], abs=1e-9), g
                assert row["mass_hat"] == pytest.approx(h["mass_hat"][g], abs=1e-12), g
                assert row["p_lo"] <= row["p"] <= row["p_hi"]
            else:
                assert row["p"] is None and row["p_lo"] is None and row["n_draws"] == 0, g
            if g in h["r"]:
                assert row["r"] == pytest.approx(h["r"][g], abs=1e-9), g
                assert row["r_lo"] <= row["r"] <= row["r_hi"]
                if row["p"] is not None:
                    p, r = row["p"], row["r"]
                    assert row["f1"] == pytest.approx(2 * p * r / (p + r) if p + r else 0.0, abs=1e-9)
            else:
                assert row["r"] is None and row["n_true"] == 0 and row["f1"] is None, g
    # instance counts per group
    counts = defaultdict(int)
    for p in RelationInstance.objects.filter(submission=a).values_list("predicate", flat=True):
        counts[p] += 1
    assert all(rel[g]["instances"] == counts.get(g, 0) for g in rel)
    types = defaultdict(int)
    for t in RelationInstance.objects.filter(submission=a).values_list("subject__type", flat=True):
        types[t] += 1
    assert all(typ[g]["instances"] == types.get(g, 0) for g in typ)
    # the group estimates weighted by their estimated masses give back the joint precision of the score (a
    # self-normalised ratio: over the masses' total)
    combined = (sum(r["mass_hat"] * r["p"] for r in bd["relation"] if r["p"] is not None)
                / sum(r["mass_hat"] for r in bd["relation"]))
    assert combined == pytest.approx(score.details["raw"]["p"], abs=1e-9)
    # the groups' recall (the exhaustive documents alone) weighted by their true instances' weights: the simple
    # recall over every true instance; the "all" row is the score itself, figure for figure
    rows_r = [r for r in bd["relation"] if r["r"] is not None]
    assert sum(r["true_weight"] * r["r"] for r in rows_r) / sum(r["true_weight"] for r in rows_r) == pytest.approx(
        hand["recall_all"], abs=1e-9)
    for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi"):
        assert bd["all"][k] == getattr(score, k), k
    assert bd["all"]["n_true"] == len(_truth(corpus))
    assert bd["all"]["instances"] == a.instances.count() and bd["own_draws"] == score.draws
    # the page shows the tables, the numbers and the charts
    for g in ("relation-table", "type-table", 'id="scores"', 'id="errors"', 'id="missed"'):
        assert g in html, g
    # 3 exhaustive documents: every group's recall rests on fewer than 5 documents, so every F1 reads "too few"
    # and no chart is drawn
    assert all(r["r_few"] and r["f1_few"] for r in bd["relation"] + bd["entity_type"] if r["r"] is not None)
    assert "too few true instances" in html and "too few draws" in html and "<svg" not in html
    assert 'all: the headline score' in html
    assert rel["P17"]["description"] == "country" and '<code>P17</code> <span class="muted">country</span>' in html
    some = next(r for r in bd["relation"] if r["p"] is not None)
    assert f'data-group="{some["group"]}"' in html
    assert f'{floatformat(some["p"], 3)}<span class="ci">{floatformat(some["p_lo"], 3)}–{floatformat(some["p_hi"], 3)}</span>' in html
    for s in Score.objects.filter(submission=a).values_list("level", flat=True).distinct():
        assert f'data-level="{s}"' in html
    assert f'id="status-link" href="{reverse("web:status", args=[a.pk])}"' in html
    # another level has its own breakdown
    resp = client.get(reverse("web:submission", args=[a.pk]) + "?level=relation")
    assert resp.status_code == 200
    rscore = Score.objects.filter(submission=a, level="relation").latest("id")
    assert breakdown.stored(rscore)["level"] == "relation"


def test_breakdown_is_computed_once_per_score(world, client, monkeypatch, django_assert_max_num_queries):
    corpus, a, b = world
    url = reverse("web:submission", args=[b.pk])
    # another request is computing it: say so, do not wait, do not compute twice
    from django.core.cache import cache

    lock = f"unpooled:breakdown:{corpus.pk}:instance"
    assert cache.add(lock, 1)
    html = client.get(url).content.decode()
    assert 'id="breakdown-pending"' in html and "relation-table" not in html and 'id="score-table"' in html
    cache.delete(lock)
    # a failing computation leaves the rest of the page (and the lock) intact
    def fail(*args, **kw):
        raise RuntimeError("boom")

    monkeypatch.setattr(breakdown, "compute_breakdowns", fail)
    resp = client.get(url)
    assert resp.status_code == 200 and 'id="breakdown-failed"' in resp.content.decode()
    assert cache.add(lock, 1), "the lock is released after a failure"
    cache.delete(lock)
    monkeypatch.undo()
    assert client.get(url).status_code == 200
    # the first view computed the breakdown of every newest score of the corpus at that level
    for s in breakdown.newest_scores_of_corpus(corpus, "instance").values():
        assert breakdown.stored(s) is not None
    def boom(*a, **k):
        raise AssertionError("the breakdown must be read, not recomputed")

    monkeypatch.setattr(breakdown, "_scored_design", boom)
    with django_assert_max_num_queries(12):
        html = client.get(url).content.decode()
    assert "relation-table" in html
    assert client.get(reverse("web:submission", args=[a.pk])).status_code == 200
    # a new score (re-scoring) gets a breakdown (its inputs': the old one's row); the old one keeps it
    monkeypatch.undo()
    from unpooled.service.evaluations.publish import score_corpus

    old = Score.objects.filter(submission=a, level="instance").latest("id")
    _stale(corpus)
    score_corpus(corpus, level="instance")
    new = Score.objects.filter(submission=a, level="instance").latest("id")
    assert new.pk != old.pk and breakdown.stored(new) is None
    assert breakdown.compute_breakdowns(corpus, "instance") == 2
    new.refresh_from_db()
    assert breakdown.stored(new)["score"] == new.pk and breakdown.stored(old)["score"] == old.pk
    assert new.breakdown_id == old.breakdown_id
    assert breakdown.compute_breakdowns(corpus, "instance") == 0


def test_errors_and_missed(world, client):
    corpus, a, b = world
    client.force_login(_user("alice", team=a.team))
    html = client.get(reverse("web:submission", args=[a.pk])).content.decode()
    labels = {lab.key: lab for lab in Label.objects.filter(corpus=corpus).order_by("id")}
    drawn = list(dict.fromkeys(Draw.objects.filter(submission=a).order_by("id").values_list("instance_id", flat=True)))
    inst = {i.pk: i for i in RelationInstance.objects.filter(pk__in=drawn).select_related("document")}
    wrong = [pk for pk in drawn if inst[pk].key in labels and not labels[inst[pk].key].correct]
    labelled = sum(1 for pk in drawn if inst[pk].key in labels)
    from unpooled.service.web.views.submission import ERRORS_PER_PAGE as E
    from unpooled.service.web.views.submission import MISSED_PER_PAGE as M

    assert len(wrong) > E, "the world should fill more than one page of errors"
    assert f"{len(wrong)} of the {labelled} labelled drawn instances ({len(drawn)} drawn)" in html
    # the first page lists the first E wrong instances (first drawn first), spans highlighted
    table = html[html.index('id="error-table"'):html.index('id="missed"')]
    assert table.count("<tr>") == 1 + E
    from django.utils.html import escape

    for pk in wrong[:E]:
        i = inst[pk]
        text = i.document.text
        assert f'<mark class="subj">{escape(text[i.subject_start:i.subject_end])}</mark>' in table
        assert f'<mark class="obj">{escape(text[i.object_start:i.object_end])}</mark>' in table
    assert '<span class="prov">' in table and "errors_page=2" in table
    page2 = client.get(reverse("web:submission", args=[a.pk]) + "?errors_page=2").content.decode()
    t2 = page2[page2.index('id="error-table"'):page2.index('id="missed"')]
    assert t2.count("<tr>") == 1 + min(E, len(wrong) - E)
    i = inst[wrong[E]]
    assert escape(i.document.text[i.subject_start:i.subject_end]) in t2
    # missed: the true instances the submission does not overlap-match
    hand = _hand(a, [b], corpus)
    truth = _truth(corpus)
    assert 0 < len(hand["missed"]) < len(truth)
    assert f"{len(hand['missed'])} of the {len(truth)} true instances" in html
    mtable = html[html.index('id="missed-table"'):html.index('id="downloads"')]
    docs = {d.doc_id: d.text for d in corpus.documents.all()}
    # listed by document, then position
    for t in sorted(hand["missed"], key=lambda t: (t[0], t[1], t[4], t[3]))[:M]:
        doc, s0, s1, pred, o0, o1 = t[:6]
        assert f"<code>{pred}</code>" in mtable
        assert f'<mark class="subj">{escape(docs[doc][s0:s1])}</mark>' in mtable
        assert f'<mark class="obj">{escape(docs[doc][o0:o1])}</mark>' in mtable
    bd = breakdown.stored(Score.objects.filter(submission=a, level="instance").latest("id"))
    assert {(e[1], e[2], e[3], e[4], e[5], e[6]) for e in bd["missed"]} == {t[:6] for t in hand["missed"]}


def test_downloads(world, client):
    corpus, a, b = world
    client.force_login(_user("alice", team=a.team))
    resp = client.get(reverse("web:submission_sample", args=[a.pk]))
    assert resp.status_code == 200 and "attachment" in resp["Content-Disposition"]
    lines = [json.loads(x) for x in resp.content.decode().splitlines()]
    draws = list(Draw.objects.filter(submission=a).order_by("level", "seq").select_related("instance__document",
                                                                                          "instance__subject"))
    assert len(lines) == len(draws) == 70
    labels = {}
    for lab in Label.objects.filter(corpus=corpus, method="majority").order_by("id"):
        labels[lab.key] = lab
    unlabelled = 0
    for line, d in zip(lines, draws):
        i = d.instance
        assert (line["seq"], line["level"], line["key"]) == (d.seq, d.level, d.key)
        assert line["doc"] == i.document.doc_id and line["predicate"] == i.predicate
        assert line["subject"] == {"start": i.subject_start, "end": i.subject_end, "entity": i.subject.name,
                                   "type": i.subject.type}
        assert line["object"]["start"] == i.object_start and line["object"]["entity"] == i.object.name
        assert line["provenance"] == [{"start": s, "end": e} for s, e in
                                      (tuple(map(int, p.split("-"))) for p in i.provenance.split(";"))]
        lab = labels.get(d.key)
        if lab is None:
            assert line["label"] is None
            unlabelled += 1
        else:
            assert line["label"] == {"correct": lab.correct, "probability": lab.probability, "method": "majority",
                                     "n_answers": 3}
    assert unlabelled > 0
    # scores: every Score row with all fields, and its breakdown (computed at one level)
    breakdown.compute_breakdowns(corpus, "instance")
    got = json.loads(client.get(reverse("web:submission_scores", args=[a.pk, "json"])).content)
    rows = list(Score.objects.filter(submission=a).order_by("id"))
    assert got["submission"] == a.pk and [r["id"] for r in got["scores"]] == [s.pk for s in rows]
    assert set(got["scores"][0]) == ({f.attname for f in Score._meta.concrete_fields} - {"breakdown_id", "paired"}
                                     | {"breakdown"})
    for rec, s in zip(got["scores"], rows):
        assert (rec["level"], rec["p"], rec["r_hi"], rec["f1"], rec["draws"]) == (s.level, s.p, s.r_hi, s.f1, s.draws)
        bd = breakdown.stored(s)
        # the breakdown (read from its row) but the error analysis, which is the team's
        assert rec["breakdown"] == (None if bd is None else json.loads(json.dumps(
            {k: v for k, v in bd.items() if k != "missed"})))
        assert bd is None or "missed" in bd
        assert "breakdown" not in rec["details"]
    assert any(rec["breakdown"] for rec in got["scores"])
    csv_resp = client.get(reverse("web:submission_scores", args=[a.pk, "csv"]))
    assert csv_resp["Content-Type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(csv_resp.content.decode())))
    assert len(table) == len(rows) and float(table[0]["p"]) == pytest.approx(rows[0].p)
    assert json.loads(table[0]["details"])["raw"]["p"] == pytest.approx(rows[0].details["raw"]["p"])
    assert [json.loads(r["breakdown"]) for r in table] == [r["breakdown"] for r in got["scores"]]
    assert client.get(reverse("web:submission_scores", args=[a.pk, "xml"])).status_code == 404


def test_permissions(world, client):
    corpus, a, b = world
    Submission.objects.filter(pk=a.pk).update(visibility=Submission.Visibility.PRIVATE)
    urls = [reverse("web:submission", args=[a.pk]), reverse("web:submission_sample", args=[a.pk]),
            reverse("web:submission_scores", args=[a.pk, "json"]), reverse("web:export", args=[a.pk, "jsonl"])]
    # anonymous and another team: a private submission does not exist for them
    for user in (None, _user("bob", team=b.team)):
        if user is not None:
            client.force_login(user)
        for u in urls:
            assert client.get(u).status_code == 404, (user, u)
        # b is public: page and scores yes, error analysis and the labelled sample no
        page = client.get(reverse("web:submission", args=[b.pk]))
        assert page.status_code == 200
        html = page.content.decode()
        if user is None:
            assert 'id="errors"' not in html and 'id="missed"' not in html and "sample-jsonl" not in html
            assert client.get(reverse("web:submission_sample", args=[b.pk])).status_code == 403
        assert client.get(reverse("web:submission_scores", args=[b.pk, "csv"])).status_code == 200
    # bob is in team b: he sees b's error analysis
    html = client.get(reverse("web:submission", args=[b.pk])).content.decode()
    assert 'id="errors"' in html and "sample-jsonl" in html
    assert client.get(reverse("web:submission_sample", args=[b.pk])).status_code == 200
    # the submitting team and an organiser see everything of a
    for user in (_user("alice", team=a.team), _user("org", staff=True)):
        client.force_login(user)
        html = client.get(urls[0]).content.decode()
        assert 'id="errors"' in html and 'id="missed"' in html and "sample-jsonl" in html
        for u in urls[1:]:
            assert client.get(u).status_code == 200, (user, u)
    # a member of another team viewing public b: no error analysis, sample 403
    client.force_login(get_user_model().objects.get(username="alice"))
    html = client.get(reverse("web:submission", args=[b.pk])).content.decode()
    assert 'id="errors"' not in html and "sample-jsonl" not in html
    assert client.get(reverse("web:submission_sample", args=[b.pk])).status_code == 403


def test_score_exports_name_no_other_submission(world, client):
    """A public submission's scores (JSON and CSV) left out the covariances with the other submissions of its
    scoring (``Score.paired``), keyed by their ids, private ones included: a private run's existence showed there."""
    corpus, a, b = world
    Submission.objects.filter(pk=b.pk).update(visibility=Submission.Visibility.PRIVATE)
    assert any(str(b.pk) in json.dumps(s.paired) for s in Score.objects.filter(submission=a))  # what was exported
    got = json.loads(client.get(reverse("web:submission_scores", args=[a.pk, "json"])).content)
    assert got["scores"] and all("paired" not in rec for rec in got["scores"])
    table = list(csv.DictReader(io.StringIO(client.get(reverse("web:submission_scores", args=[a.pk, "csv"]))
                                            .content.decode())))
    assert table and "paired" not in table[0]
    assert all(json.loads(r["details"]) is not None for r in table)  # the JSON columns stay JSON


def test_unscored_submission_page(shared_data, tmp_path, client):
    from ..conftest import load_redocred_subset

    _, sub, _ = load_redocred_subset(shared_data, tmp_path, 3, "bdempty")
    html = client.get(reverse("web:submission", args=[sub.pk])).content.decode()
    assert 'id="no-scores"' in html and "relation-table" not in html and 'id="instances"' in html


def test_highlight_segments():
    text = "Alice met Bob in Paris yesterday."
    segs = breakdown.highlight(text, [(0, len(text))], (0, 5), (10, 13), [(0, 22)])
    assert "".join(s.text for s in segs) == text
    assert [(s.text, s.role, s.prov) for s in segs] == [
        ("Alice", "subj", True), (" met ", "", True), ("Bob", "obj", True), (" in Paris", "", True),
        (" yesterday.", "", False)]
    sents = [(0, 10), (10, 33)]
    assert breakdown.context_windows(text, sents, [(10, 13)], [(10, 13)]) == [(10, 33)]
    assert breakdown.context_windows(text, sents, [(2, 4), (11, 12)], [(2, 4)]) == [(0, 33)]
    # subject and object far apart: their own sentences, with a gap between
    long = "A b c. " + "x " * 400 + "D e f."
    sents = [(0, 7), (7, len(long) - 6), (len(long) - 6, len(long))]
    obj = (len(long) - 6, len(long) - 5)
    assert breakdown.context_windows(long, sents, [(0, 1), obj], [(0, 1), obj]) == [(0, 7), sents[2]]
    segs = breakdown.highlight(long, [(0, 7), sents[2]], (0, 1), obj)
    assert [s.role for s in segs] == ["subj", "", "gap", "obj", ""] and segs[2].text == " … "
    assert breakdown.parse_estimator("joint/heuristic/exact") == ("heuristic", "exact")
    assert breakdown.parse_estimator("odd") == ("balance", "overlap")


def test_page_is_cached_until_what_it_shows_changes(world, client, monkeypatch, django_assert_max_num_queries):
    """The body is rendered once per (newest scores, submission state, viewer, level, page numbers) and
    served from the cache; a new score, a visibility change or another viewer gives a fresh render."""
    from unpooled.service.evaluations import status
    from unpooled.service.evaluations.publish import score_corpus
    from unpooled.service.web.views import submission as view

    corpus, a, b = world
    url = reverse("web:submission", args=[a.pk])
    breakdown.compute_breakdowns(corpus, "instance")
    first = client.get(url).content.decode()
    assert 'id="score-table"' in first and "relation-table" in first and 'id="errors"' not in first
    assert "{#" not in first and "#}" not in first, "a template comment leaked into the page"

    def boom(*args, **kw):
        raise AssertionError("a cached page must not be rendered again")

    monkeypatch.setattr(view, "_render_content", boom)
    with django_assert_max_num_queries(4):  # the submission, the newest score ids, the newest entity score id
        assert client.get(url).content.decode() == first
    # another page of the instance table, the team's view, a new score: rendered afresh
    monkeypatch.undo()
    assert client.get(url + "?page=2").content.decode() != first
    client.force_login(_user("alice", team=a.team))
    team = client.get(url).content.decode()
    assert 'id="errors"' in team and 'id="missed"' in team
    client.logout()
    assert client.get(url).content.decode() == first, "the team's view is cached apart from the public one"
    score_corpus(corpus, level="instance")  # nothing new: no new score, the page stays
    assert client.get(url).content.decode() == first
    _stale(corpus)
    score_corpus(corpus, level="instance")
    new = Score.objects.filter(submission=a, level="instance").latest("id")
    Score.objects.filter(pk=new.pk).update(p=0.123456)
    breakdown.compute_breakdowns(corpus, "instance")
    html = client.get(url).content.decode()
    assert "0.123" in html and html != first
    assert status.newest_scores(a)["instance"].pk == new.pk
    # a bulk update that bypasses ``updated`` still shows
    Submission.objects.filter(pk=a.pk).update(visibility=Submission.Visibility.PRIVATE)
    client.force_login(_user("org", staff=True))
    assert "· private ·" in client.get(url).content.decode()


def test_page_with_a_pending_breakdown_is_not_cached(world, client):
    from django.core.cache import cache

    corpus, a, b = world
    url = reverse("web:submission", args=[a.pk])
    lock = f"unpooled:breakdown:{corpus.pk}:instance"
    assert cache.add(lock, 1)
    assert 'id="breakdown-pending"' in client.get(url).content.decode()
    cache.delete(lock)
    html = client.get(url).content.decode()
    assert 'id="breakdown-pending"' not in html and "relation-table" in html


# -- the page's headline, short tables and the team's settings form ------------------------------------------
def test_headline_short_tables_and_names(world, client):
    corpus, a, b = world
    score = Score.objects.filter(submission=a, level="instance").latest("id")
    html = client.get(reverse("web:submission", args=[a.pk])).content.decode()
    # the headline: P, R, F1 with their intervals; the sample figures beside the published ones
    assert 'id="headline"' in html and f"{floatformat(score.p, 3)}" in html
    assert 'id="sample-figures"' in html and f"{score.draws} labelled draws" in html
    # relation rows without a labelled draw are there but hidden by default (a toggle shows them)
    score.refresh_from_db()
    bd = breakdown.stored(score)
    empty = [r for r in bd["relation"] if not r["n_draws"]]
    assert empty, "the world should have relations without draws"
    assert 'class="breakdown sortable hide-empty" id="relation-table"' in html
    assert html.count('class="nodraw"') >= len(empty) and 'class="toggle-empty"' in html
    # relation names beside their codes in the instance table; the duplicate "by predicate" list is gone
    assert '<code>P17</code> <span class="muted">country</span>' in html and "Instances by predicate" not in html
    assert "string_instances" not in html


def test_headline_says_when_and_from_what_the_score_changed(world, client):
    """A re-scoring that leaves the figures alone says nothing; one that moves them shows the previous figures and
    when they changed; the labelled-sample figures sit under one detail; annotator quality is sensitivity and
    false-positive rate."""
    from django.core.cache import cache

    from unpooled.service.evaluations.publish import score_corpus
    from unpooled.service.evaluations.status import score_change

    corpus, a, b = world
    url = reverse("web:submission", args=[a.pk])
    first = Score.objects.filter(submission=a, level="instance").latest("id")
    assert score_change(first) is None and 'id="score-change"' not in client.get(url).content.decode()
    score_corpus(corpus, level="instance")  # nothing new: the newest score stands (a new one would repeat it)
    assert Score.objects.filter(submission=a, level="instance").latest("id").pk == first.pk
    _stale(corpus)  # a new score with the same figures (other counts)
    score_corpus(corpus, level="instance")
    same = Score.objects.filter(submission=a, level="instance").latest("id")
    assert same.pk != first.pk and score_change(same) is None
    # a label of one of a's drawn keys flips: the figures move
    keys = Draw.objects.filter(submission=a, level="instance").values("key")
    lab = Label.objects.filter(corpus=corpus, method="majority", correct=True, key__in=keys).order_by("id").first()
    Label.objects.create(corpus=corpus, key=lab.key, key_hash=lab.key_hash, probability=1 / 3, correct=False,
                         method="majority", n_answers=3, guideline_version="test")
    score_corpus(corpus, level="instance")
    new = Score.objects.filter(submission=a, level="instance").latest("id")
    assert round(new.p, 3) != round(first.p, 3)
    got = score_change(new)
    assert got["changed"] == new.created and got["previous_created"] == same.created
    assert got["previous"] == {k: getattr(first, k) for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo",
                                                                "f1_hi")}
    html = client.get(url).content.decode()
    assert 'id="score-change"' in html
    assert (f"before, P {floatformat(first.p, 3)} [{floatformat(first.p_lo, 3)}–{floatformat(first.p_hi, 3)}], "
            f"R {floatformat(first.r, 3)}") in html
    assert 'id="raw-figures"' not in html and "crowd-rates" not in html  # labels without votes: neither
    # with the crowd's votes: the rates the correction used, the labelled-sample figures under one detail
    new.details = {**new.details, "sample": {"p": 0.5, "r": 0.25, "f1": 0.3333}, "crowd_rates": {"sens": 0.79,
                                                                                                 "fpr": 0.18}}
    new.save(update_fields=["details"])
    cache.clear()
    html = client.get(url).content.decode()
    assert "sensitivity 0.79, false-positive rate 0.18" in html and "accuracy" not in html.split('id="entities"')[0]
    raw = html.split('id="raw-figures"')[1].split("</details>")[0]
    assert "Labelled sample, every majority label taken as certain" in raw and "P 0.500, R 0.250, F1 0.333" in raw
    assert "raw share" not in html and "Raw labelled sample" not in html


def test_headline_shows_the_prediction_powered_precision_beside(world, client):
    """Without confidences (all 1) a score has no prediction-powered figure; with confidences that follow the
    labels, each new score keeps the PPI++ precision beside the label-only one of the same draws (marked as not
    used) and the page shows both."""
    from django.core.cache import cache

    from unpooled.service.evaluations.publish import score_corpus

    corpus, a, b = world
    url = reverse("web:submission", args=[a.pk])
    first = Score.objects.filter(submission=a, level="instance").latest("id")
    assert "ppi" not in first.details and 'id="ppi-figures"' not in client.get(url).content.decode()
    correct = dict(Label.objects.filter(corpus=corpus, method="majority").values_list("key", "correct"))
    for inst in RelationInstance.objects.filter(submission__in=[a, b]):
        base = {True: 0.8, False: 0.25}.get(correct.get(inst.key), 0.5)
        inst.confidence = base + 0.01 * (inst.pk % 7)
        inst.save(update_fields=["confidence"])
    # stored instances never change, so the corpus's inputs keep their confidences with the pool; edited in place
    # here, the kept pool is dropped
    from unpooled.service.evaluations import scoring

    scoring.clear_cache()
    score_corpus(corpus, level="instance")
    new = Score.objects.filter(submission=a, level="instance").latest("id")
    q = new.details["ppi"]
    assert q["method"] == "ppi++" and q["used"] is False and q["lambda"] > 0 and q["narrower"] > 0
    assert q["lo"] <= q["p"] <= q["hi"] and q["hi"] - q["lo"] < q["labels"]["hi"] - q["labels"]["lo"]
    # the label-only figure is the published one (labels without votes here), the score itself unchanged
    assert q["labels"]["p"] == pytest.approx(min(1.0, max(0.0, new.details["raw"]["p"])), abs=1e-12)
    assert (new.p, new.p_lo, new.p_hi) == (first.p, first.p_lo, first.p_hi)
    # the same figure as the from-scratch path (the core's offline score of the stored submissions)
    ref = scoring.from_scratch(corpus, level="instance").result
    i = ref.systems.index(next(n for n, s in scoring.score(corpus, level="instance").by_name.items() if s.pk == a.pk))
    assert q["p"] == pytest.approx(min(1.0, max(0.0, float(ref.ppi.p.value[i]))), abs=1e-9)
    assert q["lambda"] == pytest.approx(float(ref.ppi.lam[i]), rel=1e-6)
    cache.clear()
    html = client.get(url).content.decode()
    shown = html.split('id="ppi-figures"')[1].split("</p>")[0]
    assert "Prediction-powered precision" in shown and "not used" in shown
    assert f"{floatformat(q['p'], 3)} [{floatformat(q['lo'], 3)}–{floatformat(q['hi'], 3)}]" in shown
    assert f"an interval {q['narrower']}% narrower" in shown


def test_team_edits_settings_on_the_page_and_others_are_refused(world):
    from django.test import Client

    corpus, a, b = world
    url = reverse("web:submission_settings", args=[a.pk])
    page = reverse("web:submission", args=[a.pk])
    new = {"visibility": "private", "description": "BERT + rules", "link": "https://example.org/paper"}
    alice, bob, org = _user("alice", team=a.team), _user("bob", team=b.team), _user("org", staff=True)
    before = Submission.objects.values("visibility", "description", "link").get(pk=a.pk)

    # CSRF is enforced: the team's own post without the token is refused and changes nothing
    c = Client(enforce_csrf_checks=True)
    c.force_login(alice)
    assert c.post(url, new).status_code == 403
    assert Submission.objects.values("visibility", "description", "link").get(pk=a.pk) == before
    # the form is on the team's page only, with a token
    html = c.get(page).content.decode()
    assert 'id="settings-form"' in html and "csrfmiddlewaretoken" in html
    for user in (None, bob, org):
        other = Client()
        if user is not None:
            other.force_login(user)
        assert 'id="settings-form"' not in other.get(page).content.decode()
        # refused: anonymous and another team 403 (a is public, so they may see it), nothing changes
        r = other.post(url, new)
        assert r.status_code == 403, (user, r.status_code)
        assert Submission.objects.values("visibility", "description", "link").get(pk=a.pk) == before
    # a bad link is refused with the field named, nothing stored
    c = Client()
    c.force_login(alice)
    r = c.post(url, {**new, "link": "javascript:alert(1)"})
    assert r.status_code == 400 and "Enter a valid URL" in r.content.decode()
    assert Submission.objects.values("visibility", "description", "link").get(pk=a.pk) == before
    assert c.get(url).status_code == 405
    # a pasted address with accents is stored percent-encoded (the API's rule: printable ASCII)
    r = c.post(url, {**new, "link": "https://de.wikipedia.org/wiki/Überwachung"})
    assert r.status_code == 302
    assert Submission.objects.get(pk=a.pk).link == "https://de.wikipedia.org/wiki/%C3%9Cberwachung"
    # the team's post with the token saves and shows at once (the cached page has a new key)
    r = c.post(url, new)
    assert r.status_code == 302 and r["Location"].endswith("?saved=1")
    got = Submission.objects.get(pk=a.pk)
    assert (got.visibility, got.description, got.link) == ("private", "BERT + rules", "https://example.org/paper")
    html = c.get(r["Location"]).content.decode()
    assert 'id="settings-saved"' in html and "BERT + rules" in html and 'href="https://example.org/paper"' in html
    # now private: another team no longer sees it at all
    other = Client()
    other.force_login(bob)
    assert other.post(url, new).status_code == 404 and other.get(page).status_code == 404


def test_page_numbers_that_mean_the_same_page_share_one_cached_render(world, monkeypatch):
    """Security review N6: every distinct raw ``?page=`` value (``1x``, ``01``, ...) was a full render kept in the
    cache for a day, and the team's ``errors_page`` counted for everyone.  Now a value is a page number (anything
    else is page 1), only the sections the viewer sees count, and a page past the last is not kept."""
    from django.test import Client

    from unpooled.service.web.views import submission as view

    corpus, a, _ = world
    writes: list[str] = []
    real = view.cache

    class Spy:
        def __getattr__(self, name):
            return getattr(real, name)

        def set(self, key, *args, **kw):
            writes.append(key)
            return real.set(key, *args, **kw)

    monkeypatch.setattr(view, "cache", Spy())
    c = Client()
    url = reverse("web:submission", args=[a.pk])
    for q in ("", "?page=1", "?page=1x", "?page=01", "?page=abc", "?page=%C2%B2", "?errors_page=7&missed_page=x",
              "?page=0", "?page=-3"):
        assert c.get(url + q).status_code == 200, q
    assert len([k for k in writes if k.startswith("unpooled.subpage:")]) == 1, writes
    writes.clear()
    assert c.get(url + "?page=99999").status_code == 200  # the last page, shown but not kept under its own key
    assert not [k for k in writes if k.startswith("unpooled.subpage:")], writes


def test_fresh_renders_for_readers_not_signed_in_are_limited_per_address(world, settings):
    """Security review N6's rest: distinct pages made afresh (cache misses) by one address not signed in are
    limited per minute (429 with Retry-After); pages served from the cache and signed-in readers are not counted."""
    from django.test import Client

    settings.RENDERS_PER_ADDRESS = 3
    corpus, a, b = world
    c = Client(REMOTE_ADDR="10.8.0.1")
    url = reverse("web:submission", args=[a.pk])
    got = [c.get(url + f"?page={n}").status_code for n in (1, 1, 1)]  # one render, then the cache
    assert got == [200, 200, 200]
    got = [c.get(reverse("web:submission", args=[b.pk]) + q).status_code for q in ("", "?level=relation", "?page=2")]
    assert got[:2] == [200, 200] and got[2] == 429, got
    r = c.get(url + "?level=relation")
    assert r.status_code == 429 and int(r["Retry-After"]) > 0 and "try again in" in r.content.decode()
    assert c.get(url).status_code == 200  # from the cache
    assert Client(REMOTE_ADDR="10.8.0.2").get(url + "?level=relation").status_code == 200  # another address
    member = Client(REMOTE_ADDR="10.8.0.1")
    member.force_login(_user("reader-signed-in", team=b.team))
    assert member.get(reverse("web:submission", args=[a.pk]) + "?level=relation&page=2").status_code == 200


def test_readers_not_signed_in_get_the_whole_page_from_the_cache(world, client):
    """Issue 22, item 9: once rendered, a reader not signed in gets the whole page for 2 queries (the submission
    and its newest score ids); a new description renders it afresh; a team member never gets the anonymous page."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    corpus, a, b = world
    url = reverse("web:submission", args=[a.pk])
    first = client.get(url).content.decode()
    with CaptureQueriesContext(connection) as q:
        again = client.get(url).content.decode()
    assert again == first and len(q.captured_queries) <= 2, [x["sql"][:80] for x in q.captured_queries]
    import gzip

    packed = client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert packed["Content-Encoding"] == "gzip" and "Accept-Encoding" in packed["Vary"]
    assert gzip.decompress(packed.content).decode() == first and len(packed.content) < len(first) / 3
    plain = client.get(url, HTTP_ACCEPT_ENCODING="gzip;q=0, br")
    assert "Content-Encoding" not in plain and plain.content.decode() == first
    private = Submission.objects.get(pk=b.pk)
    private.visibility = Submission.Visibility.PRIVATE
    private.save()
    assert client.get(reverse("web:submission", args=[b.pk])).status_code == 404
    sub = Submission.objects.get(pk=a.pk)
    sub.description = "a fresh description"
    sub.save()
    assert "a fresh description" in client.get(url).content.decode()
    from django.test import Client

    member = Client()
    member.force_login(_user("alice", team=a.team))
    assert 'id="settings-form"' in member.get(url).content.decode()


def test_errors_say_where_their_labels_come_from(world, client):
    """UX review 2026-11-26 #5: the error analysis said "labelled wrong by the annotators" of a simulated crowd's
    labels.  It now says whose answers the labels aggregate (from the labels' own annotators) and, for a simulated
    crowd, that it reads the gold layer, with its accuracy only while the corpus's backend is that crowd."""
    import re

    from django.core.cache import cache
    from django.utils.html import strip_tags

    from unpooled.service.annotation.actions import settings_for
    from unpooled.service.annotation.models import Annotator, Backend
    from unpooled.service.crowd.base import SimulatedBackend

    corpus, a, _ = world
    client.force_login(_user("alice", team=a.team))

    def sources() -> str:
        cache.clear()
        html = client.get(reverse("web:submission", args=[a.pk])).content.decode()
        m = re.search(r'<div class="notice" id="label-sources">(.*?)</div>', html, re.S)
        return " ".join(strip_tags(m.group(1)).split()) if m else ""

    labels = breakdown.current_sample_labels(a)
    n = len(labels)
    assert f"{n} labels with no annotator recorded" in sources()  # written by this test, as by a tool
    people = {b: [Annotator.objects.create(backend=b, external_id=f"{b}-{k}") for k in range(k_)]
              for b, k_ in ((Backend.INHOUSE, 2), (Backend.MTURK, 1), (Backend.SIMULATED, 3))}
    keys = sorted(labels)
    split = {Backend.INHOUSE: keys[:5], Backend.MTURK: keys[5:7], Backend.SIMULATED: keys[7:]}
    for b, ks in split.items():
        Label.objects.filter(corpus=corpus, key__in=ks).update(annotators=[p.pk for p in people[b]])
    st = settings_for(corpus)
    st.backend = Backend.SIMULATED
    st.save()
    text = sources()
    sim = len(split[Backend.SIMULATED])
    assert "5 labels from 2 in-house annotators" in text and "2 labels from 1 Mechanical Turk worker," in text, text
    assert (f"{sim} labels from a simulated crowd: 3 simulated annotators, set to answer right with probability "
            f"{SimulatedBackend().accuracy}." in text), text
    assert "a fact missing from the gold layer is judged wrong" in text and "no annotator recorded" not in text
    st.backend = Backend.INHOUSE  # the corpus has moved to in-house annotators: the crowd's settings are not its own
    st.save()
    text = sources()
    assert f"{sim} labels from a simulated crowd: 3 simulated annotators." in text and "probability" not in text
    # each wrong row says whose answers its label aggregates
    html = client.get(reverse("web:submission", args=[a.pk])).content.decode()
    table = html[html.index('id="error-table"'):html.index('id="missed"')]
    cells = re.findall(r'<td class="label">(.*?)</td>', table, re.S)
    assert cells and all(re.search(r"answers? \((in-house annotators|Mechanical Turk workers|simulated crowd)\)", c)
                         for c in cells), cells
