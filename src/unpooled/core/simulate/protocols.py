r"""Recall under the two recall protocols: does each estimate what it says (``unpooled simulate protocols``)?

A *protocol world* is a corpus of documents of :data:`SENTENCES` sentences, each with entity clusters whose mentions
lie in one or two sentences (at most one mention of a cluster per sentence), and true facts
:math:`(d, h, r, t)` between clusters; a fact is *within* a sentence when some sentence holds mentions of both.
Two systems state facts through mentions of their clusters:

``sentence-strong``
    states a within-sentence fact with probability ``within`` (in a sentence holding both), a cross-sentence one
    with probability ``across`` (at random mentions): strong within sentences, weak across them;
``even``
    states every fact with probability ``even``.

A stated fact is stated a second time through other mentions with probability 0.2 (one fact, several pooled
instances: :math:`p_0` divides among them), and each system adds wrong instances (precision about 0.8).

Each trial samples ``documents`` documents uniformly for the exhaustive sample, which a perfect annotator
annotates as each protocol's relations task asks (:func:`~unpooled.core.annotation.answers.candidate_pairs`: per
sentence and cluster pair, or per cluster pair of the document), draws ``draws`` instances per system from its
instance-level :math:`p_i` with error-free labels, and scores both protocols through
:func:`unpooled.core.offline.score` (the path of ``unpooled score`` and the service): the within-sentence protocol
with the corpus's sentence split, the document protocol with its entity clusters.

Truths: **document-level** recall, the share of the world's facts a system states through any mention;
**within-sentence** recall, the share of the within-sentence protocol's true instances (one per sentence and
cluster pair holding a fact) it states exactly.  Reported per protocol and system: the truth the protocol
estimates, the mean estimate, its bias (with its Monte Carlo standard error), the coverage of the 90% intervals
(with its binomial standard error) and their mean width, and how often the interval holds the *document-level*
truth (a within-sentence number read as document-level recall).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..annotation.answers import candidate_pairs
from ..matching import InstanceRef

SENTENCES, SLOTS, WIDTH = 8, 10, 100  # sentences per document, mention slots per sentence, characters per sentence
SYSTEMS = ("sentence-strong", "even")


@dataclass
class ProtocolWorld:
    """Documents with clusters, facts and two systems' instances (module docs)."""

    mentions: dict       # doc -> [(start, end, cluster)]
    facts: set           # (doc, h, "r", t)
    within: set          # the facts some sentence holds mentions of both of
    systems: dict        # name -> [(InstanceRef, correct)]

    @property
    def sentences(self) -> dict:
        starts = [k * WIDTH for k in range(SENTENCES)]
        return {d: (starts, [s + WIDTH for s in starts]) for d in self.mentions}


def make_world(rng, *, n_documents: int = 300, clusters: int = 6, density: float = 0.15, within: float = 0.8,
               across: float = 0.2, even: float = 0.5) -> ProtocolWorld:
    """A :class:`ProtocolWorld` (module docs)."""
    mentions, facts, inside = {}, set(), set()
    for k in range(n_documents):
        doc = f"d{k}"
        slots = rng.permutation(SENTENCES * SLOTS)
        ms, used = [], 0
        for c in range(clusters):
            for s in sorted(rng.choice(SENTENCES, size=int(rng.integers(1, 3)), replace=False).tolist()):
                slot = next(int(x) for x in slots[used:] if int(x) // SLOTS == s)
                slots = slots[slots != slot]
                start = s * WIDTH + (slot % SLOTS) * 10
                ms.append((start, start + 5, c))
        mentions[doc] = ms
        sent = {c: {m[0] // WIDTH for m in ms if m[2] == c} for c in range(clusters)}
        for h in range(clusters):
            for t in range(clusters):
                if h != t and rng.random() < density:
                    facts.add((doc, h, "r", t))
                    if sent[h] & sent[t]:
                        inside.add((doc, h, "r", t))
    world = ProtocolWorld(mentions, facts, inside, {})
    world.systems = {"sentence-strong": _system(world, rng, within, across), "even": _system(world, rng, even, even)}
    return world


def _system(world: ProtocolWorld, rng, p_within: float, p_across: float) -> list:
    """A system's distinct instances with their correctness: each fact stated with its probability, sometimes twice
    through other mentions, and wrong instances (precision about 0.8)."""
    out: dict = {}
    for doc, h, r, t in sorted(world.facts):
        if rng.random() >= (p_within if (doc, h, r, t) in world.within else p_across):
            continue
        for _ in range(1 + (rng.random() < 0.2)):
            out.setdefault(_mention_pair(world, rng, doc, h, t, (doc, h, r, t) in world.within), True)
    n_wrong = int(round(len(out) / 4))
    docs = sorted(world.mentions)
    while n_wrong > 0:
        doc = docs[int(rng.integers(len(docs)))]
        h, t = (int(x) for x in rng.choice(1 + max(m[2] for m in world.mentions[doc]), size=2, replace=False))
        if (doc, h, "r", t) not in world.facts:
            ref = _mention_pair(world, rng, doc, h, t, False)
            if ref not in out:
                out[ref] = False
                n_wrong -= 1
    return list(out.items())


def _mention_pair(world: ProtocolWorld, rng, doc: str, h: int, t: int, same_sentence: bool) -> InstanceRef:
    ms = world.mentions[doc]
    hs, ts = [m for m in ms if m[2] == h], [m for m in ms if m[2] == t]
    if same_sentence:
        shared = sorted({m[0] // WIDTH for m in hs} & {m[0] // WIDTH for m in ts})
        s = shared[int(rng.integers(len(shared)))]
        hs, ts = [m for m in hs if m[0] // WIDTH == s], [m for m in ts if m[0] // WIDTH == s]
    a, b = hs[int(rng.integers(len(hs)))], ts[int(rng.integers(len(ts)))]
    return InstanceRef(doc, a[0], a[1], "r", b[0], b[1])


def exhaustive(world: ProtocolWorld, docs, protocol: str) -> list[InstanceRef]:
    """The true instances a perfect annotator marks on ``docs`` under ``protocol``'s relations task."""
    out = []
    for doc in docs:
        ms = [{"start": s, "end": e, "cluster": c, "type": "X"} for s, e, c in sorted(world.mentions[doc])]
        starts, ends = world.sentences[doc]
        for a, b in candidate_pairs(ms, starts, ends, protocol=protocol):
            for x, y in ((a, b), (b, a)):
                if (doc, ms[x]["cluster"], "r", ms[y]["cluster"]) in world.facts:
                    out.append(InstanceRef(doc, ms[x]["start"], ms[x]["end"], "r", ms[y]["start"], ms[y]["end"]))
    return out


def truths(world: ProtocolWorld) -> dict:
    """``{(protocol, system): true recall}`` (module docs)."""
    protocol_instances = {t.key for t in exhaustive(world, sorted(world.mentions), "sentence")}
    cluster = {(d, s, e): c for d, ms in world.mentions.items() for s, e, c in ms}
    out = {}
    for name, inst in world.systems.items():
        stated = {(x.doc, cluster[(x.doc, x.s_start, x.s_end)], "r", cluster[(x.doc, x.o_start, x.o_end)])
                  for x, ok in inst if ok}
        out[("document", name)] = len(stated & world.facts) / len(world.facts)
        out[("sentence", name)] = len({x.key for x, _ in inst} & protocol_instances) / len(protocol_instances)
    return out


def trial(world: ProtocolWorld, rng, *, documents: int = 40, draws: int = 300) -> dict:
    """One trial: ``{(protocol, system): (estimate, lo, hi)}`` through :func:`unpooled.core.offline.score`."""
    from ..offline import OfflineData, score
    from ..offline_files import LabelledDraw, Submission, TrueInstance

    subs, labels = [], []
    for name, inst in world.systems.items():
        refs = tuple(x for x, _ in inst)
        subs.append(Submission(name, "", refs, tuple(x.key for x in refs), tuple(f"{x.doc}:{x.s_start}" for x in refs),
                               tuple(f"{x.doc}:{x.o_start}" for x in refs)))
        for k, j in enumerate(rng.integers(0, len(inst), size=draws).tolist()):
            labels.append(LabelledDraw(name, inst[j][0].key, float(inst[j][1]), k))
    sample = sorted(rng.choice(sorted(world.mentions), size=documents, replace=False).tolist())
    out = {}
    for protocol in ("sentence", "document"):
        truth = tuple(TrueInstance(x, x.key) for x in exhaustive(world, sample, protocol))
        data = OfflineData(tuple(subs), tuple(labels), truth, (), world.sentences, None, frozenset(world.mentions),
                           world.mentions)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = score(data, documents=documents, recall_protocol=protocol)
        for row in res.rows:
            out[(protocol, row.system)] = (row.recall.value, row.recall.lo, row.recall.hi)
    return out


@dataclass(frozen=True)
class ProtocolRow:
    protocol: str
    system: str
    truth: float
    document_truth: float
    mean: float
    bias_se: float
    coverage: float
    coverage_se: float
    width: float
    covers_document: float


def run(trials: int = 100, *, seed: int = 0, documents: int = 40, draws: int = 300, **world) -> list[ProtocolRow]:
    """``trials`` trials on one world (fixed by ``seed``); one :class:`ProtocolRow` per protocol and system."""
    rng = np.random.default_rng(seed)
    w = make_world(rng, **world)
    true = truths(w)
    got: dict = {}
    for _ in range(trials):
        for k, v in trial(w, rng, documents=documents, draws=draws).items():
            got.setdefault(k, []).append(v)
    rows = []
    for (protocol, name), vals in got.items():
        a = np.array(vals)
        t, td = true[(protocol, name)], true[("document", name)]
        cov = float(np.mean((a[:, 1] <= t) & (t <= a[:, 2])))
        rows.append(ProtocolRow(protocol, name, t, td, float(a[:, 0].mean()), float(a[:, 0].std(ddof=1) / math.sqrt(len(a))),
                                cov, math.sqrt(cov * (1 - cov) / len(a)), float((a[:, 2] - a[:, 1]).mean()),
                                float(np.mean((a[:, 1] <= td) & (td <= a[:, 2])))))
    return rows


def format_table(rows, trials: int) -> str:
    head = (f"{'protocol':<10} {'system':<16} {'truth':>6} {'mean':>6} {'bias':>14} {'coverage':>14} {'width':>6} "
            f"{'holds doc-level truth':>22}")
    lines = [f"recall under both protocols, {trials} trials (90% intervals)", head]
    for r in rows:
        lines.append(f"{r.protocol:<10} {r.system:<16} {r.truth:6.3f} {r.mean:6.3f} "
                     f"{r.mean - r.truth:+7.3f} ±{r.bias_se:.3f} {r.coverage:7.2f} ±{r.coverage_se:.2f}  "
                     f"{r.width:6.3f} {r.covers_document:22.2f}")
    return "\n".join(lines)


__all__ = ["ProtocolRow", "ProtocolWorld", "exhaustive", "format_table", "make_world", "run", "trial", "truths"]
