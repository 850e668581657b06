r"""Bias and coverage of the entity scores (:mod:`unpooled.core.estimators.entities`) across regimes
(``unpooled simulate entities``).

**The world of one trial.**  ``documents`` documents, each with :math:`1 + \mathrm{Poisson}(4)` gold entities
of one of five types, each entity with :math:`1 + \mathrm{Poisson}(1.5)` mentions (disjoint spans); 60% of the
entities are linked to a KB entry, the rest are NIL.  Two systems (``sizes``: small or large KBs):

* each gold mention is found (same span) with probability ``detect``; a found mention has the right type with
  probability 0.85; the system's entities are the gold ones, except that each found mention is put in an entity
  of its own with probability 0.15 and pairs of entities of a document are merged with probability 0.1;
* a linked gold entity is linked by the system with probability 0.9 (the right entry with probability 0.8, else
  a wrong one), a NIL one with probability 0.1 (wrongly);
* :math:`\mathrm{Poisson}(\text{false})` spurious mentions per document (no gold span), each its own entity;
* :math:`\mathrm{Poisson}(\text{rate})` relation instances per document, each a pair of the system's mentions of
  the document (its *argument mentions*; the others are mentions outside relations).

**The evaluation, as the service runs it.**  Each system draws ``draws`` instances i.i.d. from its
instance-level :math:`p_i`; each distinct argument mention of the draws is judged "valid" by 3 of 10 annotators of
accuracy ``accuracy``, its label corrected for their error rates (one-coin, from their agreement: :func:`~unpooled.core.estimators.entities.validity_labels`); the joint estimator uses the balance weights.
``exhaustive`` documents are sampled uniformly without replacement; each is annotated by 3 annotators who make,
per gold mention and with probability :math:`1 - \text{accuracy}`, one error (the mention missed, given another
type, or put in a cluster of its own: the service's simulated crowd), aggregated by
:func:`~unpooled.core.annotation.answers.aggregate_mentions`; links are copied from the gold layer.  The entity
scores read the answers themselves (labels corrected for the crowd's rates, estimated from the answers; cells with
``answers=False`` read the aggregated layer only).  That crowd never marks a non-mention nor merges two entities;
the cell ``large-noisy`` adds both (per answer and gold mention, probability 0.05 of being put in another entity's
cluster; :math:`\mathrm{Poisson}(1)` non-mentions marked per answer, at the places where the systems' spurious
mentions fall), so that the rates :math:`s_0` and :math:`f_0` of :mod:`~unpooled.core.estimators.crowd_channels`
are not zero.

**The truth** is computed from the gold layer over *all* documents: mention P over every system mention, R over
every gold mention, typing accuracy over the valid system mentions, linking P over the system-linked mentions,
R over the gold-linked mentions, and within-document B-cubed over the gold NIL mentions the system found.

Reported per cell and metric: mean error (estimate − truth, points), mean width of the 90% intervals, coverage
(share of intervals holding the truth, with its binomial standard error) and how often the metric was defined.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..annotation.answers import aggregate_mentions
from ..estimators.entities import (METRICS, ExhaustiveDocument, Mention, argument_precision, entity_scores,
                                   validity_labels)
from ..estimators.joint import make_design, weight_matrix

TYPES = ("PER", "ORG", "GPE", "DATE", "TITLE")


@dataclass(frozen=True)
class EntityCell:
    """One regime: per system ``detect`` (recall of spans), ``false`` (spurious mentions per document) and
    ``rate`` (relation instances per document); the crowd's ``accuracy``."""

    name: str
    detect: tuple = (0.8, 0.6)
    false: tuple = (1.0, 3.0)
    rate: tuple = (3.0, 1.0)
    accuracy: float = 0.9
    documents: int = 300
    exhaustive: int = 30
    draws: int = 150
    k: int = 3
    #: score from the answers of the exhaustive documents (False: from their aggregated layer only)
    answers: bool = True
    #: a noisier crowd: per answer and gold mention, the chance of putting it in another entity's cluster, and
    #: the mean number of non-mentions marked (0: the service's simulated crowd)
    merge: float = 0.0
    spurious: float = 0.0


def default_cells() -> list[EntityCell]:
    return [
        EntityCell("large-good", rate=(6.0, 3.0), accuracy=0.95),
        EntityCell("large-bad", rate=(6.0, 3.0), accuracy=0.75),
        EntityCell("small-good", detect=(0.5, 0.3), false=(0.3, 0.5), rate=(0.4, 0.2), accuracy=0.95, draws=40),
        EntityCell("small-bad", detect=(0.5, 0.3), false=(0.3, 0.5), rate=(0.4, 0.2), accuracy=0.75, draws=40),
        EntityCell("large-bad-k5", rate=(6.0, 3.0), accuracy=0.75, k=5),
        EntityCell("few-documents", exhaustive=8, accuracy=0.9),
        EntityCell("large-noisy", rate=(6.0, 3.0), accuracy=0.75, merge=0.05, spurious=1.0),
    ]


def _world(cell: EntityCell, rng):
    """Gold layer and system mentions of every document; instances of every system."""
    gold = []  # per doc: list of Mention (cluster = entity index in doc)
    for d in range(cell.documents):
        ne = 1 + rng.poisson(4)
        ms = []
        pos = 0
        for e in range(ne):
            typ = TYPES[rng.integers(len(TYPES))]
            link = f"KB{d}_{e}" if rng.random() < 0.6 else ""
            for _ in range(1 + rng.poisson(1.5)):
                ms.append(Mention(pos, pos + 5, typ, e, link))
                pos += 20
        order = rng.permutation(len(ms))  # entity mentions interleaved through the document
        gold.append([Mention(20 * k, 20 * k + 5, ms[o].type, ms[o].cluster, ms[o].link) for k, o in enumerate(order)])
    systems = []
    for s in range(len(cell.detect)):
        per_doc = []
        for d, gms in enumerate(gold):
            ents = {g.cluster for g in gms}
            merged = {e: e for e in ents}
            el = sorted(ents)
            for a in range(len(el)):
                for b in range(a + 1, len(el)):
                    if rng.random() < 0.1 / max(len(el) - 1, 1) * 2:
                        merged[el[b]] = merged[el[a]]
            elink = {}
            for e in ents:
                gl = next(g.link for g in gms if g.cluster == e)
                if gl:
                    elink[e] = (gl if rng.random() < 0.8 else gl + "_wrong") if rng.random() < 0.9 else ""
                else:
                    elink[e] = "WRONG" if rng.random() < 0.1 else ""
            out = []
            for k, g in enumerate(gms):
                if rng.random() >= cell.detect[s]:
                    continue
                typ = g.type if rng.random() < 0.85 else TYPES[(TYPES.index(g.type) + 1 + rng.integers(4)) % 5]
                ent = f"{d}:{merged[g.cluster]}" if rng.random() >= 0.15 else f"{d}:own{k}"
                link = elink[g.cluster] if not ent.startswith(f"{d}:own") else elink[g.cluster]
                out.append(Mention(g.start, g.end, typ, ent, link))
            for k in range(rng.poisson(cell.false[s])):
                slot = int(rng.integers(max(len(gms), 1)))
                out.append(Mention(20 * slot + 8, 20 * slot + 12, TYPES[rng.integers(5)], f"{d}:false{k}", ""))
            out = list({(m.start, m.end): m for m in out}.values())
            per_doc.append(out)
        systems.append(per_doc)
    # instances: pairs of a system's mentions of one document
    universe: dict = {}
    inst_of = []
    for s, per_doc in enumerate(systems):
        mine = []
        for d, ms in enumerate(per_doc):
            if len(ms) < 2:
                continue
            for _ in range(rng.poisson(cell.rate[s])):
                a, b = rng.choice(len(ms), 2, replace=False)
                key = (d, ms[a].start, ms[a].end, ms[b].start, ms[b].end)
                mine.append(universe.setdefault(key, len(universe)))
        inst_of.append(sorted(set(mine)))
    return gold, systems, universe, inst_of


def _truth(gold, systems, s: int) -> dict:
    """The true metrics of system ``s`` over every document."""
    c = {k: [0.0, 0.0] for k in ("mention_p", "mention_r", "typing", "link_p", "link_r", "nil_b3_p", "nil_b3_r")}
    for gms, sms in zip(gold, systems[s]):
        g = {(m.start, m.end): m for m in gms}
        valid = [(m, g[(m.start, m.end)]) for m in sms if (m.start, m.end) in g]
        c["mention_p"][0] += len(valid)
        c["mention_p"][1] += len(sms)
        c["mention_r"][0] += len(valid)
        c["mention_r"][1] += len(gms)
        c["typing"][0] += sum(m.type == t.type for m, t in valid)
        c["typing"][1] += len(valid)
        c["link_p"][0] += sum(t.link == m.link for m, t in valid if m.link)
        c["link_p"][1] += sum(1 for m in sms if m.link)
        sys_at = {(m.start, m.end): m for m in sms}
        c["link_r"][0] += sum(1 for t in gms if t.link and (x := sys_at.get((t.start, t.end))) and x.link == t.link)
        c["link_r"][1] += sum(1 for t in gms if t.link)
        nil = [(m, t) for m, t in valid if not t.link]
        for m, t in nil:
            gs = {id(x) for x, y in nil if y.cluster == t.cluster}
            ss = {id(x) for x, y in nil if x.cluster == m.cluster}
            c["nil_b3_p"][0] += len(gs & ss) / len(ss)
            c["nil_b3_r"][0] += len(gs & ss) / len(gs)
        c["nil_b3_p"][1] += len(nil)
        c["nil_b3_r"][1] += len(nil)
    out = {k: a / b if b else float("nan") for k, (a, b) in c.items()}
    for pre in ("mention", "link", "nil_b3"):
        p, r = out[f"{pre}_p"], out[f"{pre}_r"]
        out[f"{pre}_f1"] = 2 * p * r / (p + r) if p + r > 0 else float("nan")
    return out


def _crowd_layer(gms, acc: float, k: int, rng, *, merge: float = 0.0, spurious: float = 0.0) -> tuple:
    """The aggregated layer and the ``k`` answers of one document (module docs; ``merge`` and ``spurious``: the
    noisier crowd's extra errors, 0 in the service's simulated crowd)."""
    answers = []
    fresh = 10 ** 6
    ents = sorted({m.cluster for m in gms})
    for _ in range(k):
        out = []
        for m in gms:
            d = {"start": m.start, "end": m.end, "type": m.type, "cluster": m.cluster, "link": m.link}
            if rng.random() < 1 - acc:
                kind = int(rng.integers(3))
                if kind == 0:
                    continue
                if kind == 1:
                    d["type"] = TYPES[(TYPES.index(m.type) + 1 + int(rng.integers(4))) % 5]
                else:
                    fresh += 1
                    d["cluster"] = fresh
            if merge and len(ents) > 1 and rng.random() < merge:  # put in another entity's cluster
                d["cluster"] = [e for e in ents if e != m.cluster][int(rng.integers(len(ents) - 1))]
            out.append(d)
        if spurious and gms:
            for slot in set(rng.integers(len(gms), size=rng.poisson(spurious)).tolist()):
                fresh += 1  # a non-mention marked, where the systems' spurious mentions are
                out.append({"start": 20 * slot + 8, "end": 20 * slot + 12, "type": TYPES[int(rng.integers(5))],
                            "cluster": fresh, "link": ""})
        out.sort(key=lambda x: x["start"])
        answers.append({"mentions": out})
    agg = aggregate_mentions(answers)
    layer = tuple(Mention(x["start"], x["end"], x["type"], x["cluster"], x["link"]) for x in agg)
    return layer, tuple(tuple(Mention(x["start"], x["end"], x["type"], x["cluster"], x["link"]) for x in a["mentions"])
                        for a in answers)


def run_trial(cell: EntityCell, rng) -> list[tuple[dict, dict]]:
    """One trial: per system, (estimates, truth) as ``metric -> (value, lo, hi)`` and ``metric -> value``."""
    gold, systems, universe, inst_of = _world(cell, rng)
    m = len(systems)
    U = max(len(universe), 1)
    keys = list(universe)
    # argument mentions: (doc, start, end) -> id
    arg_id: dict = {}
    rows, cols = [], []
    for key, x in universe.items():
        d, s0, e0, s1, e1 = key
        for span in ((d, s0, e0), (d, s1, e1)):
            rows.append(x)
            cols.append(arg_id.setdefault(span, len(arg_id)))
    args = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(U, max(len(arg_id), 1)))
    Prow, Pcol, Pval = [], [], []
    for i, xs in enumerate(inst_of):
        if not xs:
            continue
        Prow += [i] * len(xs)
        Pcol += xs
        Pval += [1.0 / len(xs)] * len(xs)
    P = sp.csr_matrix((Pval, (Prow, Pcol)), shape=(m, U))
    has = np.array([len(xs) > 0 for xs in inst_of])
    src, xs_ = [], []
    for i, xs in enumerate(inst_of):
        if xs:
            src += [i] * cell.draws
            xs_ += list(rng.choice(xs, cell.draws))
    # the drawn argument mentions, each judged by k of 10 annotators; labels corrected for their error rates
    gold_span = {(d, g.start, g.end) for d, gms in enumerate(gold) for g in gms}
    it, wk, yv = [], [], []
    seen: set = set()
    for x in sorted(set(xs_)):
        d, s0, e0, s1, e1 = keys[x]
        for span in ((d, s0, e0), (d, s1, e1)):
            a = arg_id[span]
            if a in seen:
                continue
            seen.add(a)
            truth = span in gold_span
            for w in rng.choice(10, cell.k, replace=False):
                it.append(a)
                wk.append(int(w))
                yv.append(int((rng.random() < cell.accuracy) == truth))
    valid, rates = validity_labels(it, wk, yv, n_items=args.shape[1])
    if not has.all():  # a system without instances: give it one pseudo-row so the design is square
        raise ValueError("every system needs at least one relation instance")
    design = make_design(P, src, xs_, np.ones(len(src)), np.zeros((m, 0), bool))
    W = weight_matrix(design.P, design.n, "balance")
    ap = argument_precision(design, W, args, valid, rates=rates)
    ap["draws"] = np.bincount(np.asarray(src, dtype=np.int64), minlength=m)
    # exhaustive sample
    ex = sorted(rng.choice(cell.documents, cell.exhaustive, replace=False).tolist())
    pi = cell.exhaustive / cell.documents
    docs = []
    for d in ex:
        layer, answers = _crowd_layer(gold[d], cell.accuracy, cell.k, rng, merge=cell.merge, spurious=cell.spurious)
        docs.append(ExhaustiveDocument(str(d), pi, layer, answers if cell.answers else ()))
    sysmaps = [{str(d): systems[s][d] for d in ex} for s in range(m)]
    counts, spans = [], []
    for s in range(m):
        used = {(keys[x][0], keys[x][1], keys[x][2]) for x in inst_of[s]} | \
               {(keys[x][0], keys[x][3], keys[x][4]) for x in inst_of[s]}
        counts.append((sum(len(v) for v in systems[s]), len(used)))
        sp_ = {}
        for d, a, b in used:
            sp_.setdefault(str(d), set()).add((a, b))
        spans.append(sp_)
    res = entity_scores(docs, sysmaps, mention_counts=counts, argument_spans=spans, arguments=ap, types=TYPES)
    out = []
    for s in range(m):
        est = {k: (res[s].metrics[k].value, res[s].metrics[k].lo, res[s].metrics[k].hi) for k in METRICS}
        out.append((est, _truth(gold, systems, s)))
    return out


def run_cell(cell: EntityCell, trials: int, *, seed: int = 0, progress=None) -> dict:
    rng = np.random.default_rng(seed)
    acc = {k: {"err": [], "width": [], "cover": [], "defined": 0, "n": 0} for k in METRICS}
    for _ in range(trials):
        for est, truth in run_trial(cell, rng):
            for k in METRICS:
                a = acc[k]
                a["n"] += 1
                v, lo, hi = est[k]
                t = truth[k]
                if np.isnan(t):
                    continue
                if not np.isnan(lo):
                    a["width"].append(hi - lo)
                    a["cover"].append(lo - 1e-12 <= t <= hi + 1e-12)
                if not np.isnan(v):
                    a["defined"] += 1
                    a["err"].append(v - t)
        if progress is not None:
            progress(1)
    rows = []
    for k in METRICS:
        a = acc[k]
        cov = float(np.mean(a["cover"])) if a["cover"] else float("nan")
        nc = len(a["cover"])
        rows.append({"metric": k, "bias_pts": 100 * float(np.mean(a["err"])) if a["err"] else float("nan"),
                     "rmse_pts": 100 * float(np.sqrt(np.mean(np.square(a["err"])))) if a["err"] else float("nan"),
                     "width": float(np.mean(a["width"])) if a["width"] else float("nan"),
                     "coverage": cov, "coverage_se": float(np.sqrt(cov * (1 - cov) / nc)) if nc else float("nan"),
                     "defined": a["defined"] / a["n"] if a["n"] else 0.0, "intervals": nc})
    return {"cell": cell.name, "accuracy": cell.accuracy, "exhaustive": cell.exhaustive, "draws": cell.draws,
            "rows": rows}


def format_table(cells: list[dict]) -> str:
    head = f"{'cell':<14} {'metric':<11} {'bias(pt)':>8} {'rmse(pt)':>8} {'width':>6} {'cover90':>7} {'±se':>5} {'defined':>7}"
    lines = [head, "-" * len(head)]
    for c in cells:
        for r in c["rows"]:
            lines.append(f"{c['cell']:<14} {r['metric']:<11} {r['bias_pts']:>8.2f} {r['rmse_pts']:>8.2f} "
                         f"{r['width']:>6.3f} {r['coverage']:>7.3f} {r['coverage_se']:>5.3f} {r['defined']:>7.2f}")
    return "\n".join(lines)


__all__ = ["EntityCell", "default_cells", "format_table", "run_cell", "run_trial"]
