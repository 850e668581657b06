"""The simulated crowd: answers open tasks from a corpus's gold annotation layer.

Each simulated annotator is a row of :class:`~unpooled.service.annotation.models.Annotator`
(backend ``simulated``) and works through the same path as a person: it leases a task
with :func:`~unpooled.service.annotation.leasing.lease_next` and answers it with
:func:`~unpooled.service.annotation.actions.submit_answer`.  What it answers is the
truth (from the gold layer) with probability ``accuracy``, else a wrong answer:

* verify: the opposite judgement (with ``bias`` > 0 errors lean towards "correct":
  an annotator with bias b answers "correct" on a wrong item with probability
  ``(1 − a)(1 + b)`` clipped to [0, 1] and "wrong" on a correct item with probability
  ``(1 − a)(1 − b)``; b = 0 keeps the accuracy exactly ``a`` on both classes); the subject and
  object are judged valid mentions or not with accuracy ``1 − (1 − a)/3`` each, independently
  (:meth:`SimulatedCrowd.answer_verify`);
* entities: per gold mention, with probability ``1 − a`` one error: the mention is
  missed, given another type, or put in a cluster of its own;
* relations: per candidate pair, with probability ``1 − a`` one error: a true
  relation dropped or a wrong one added.

With ``relation_rates`` a verification of a relation (a control too) that a group names is answered "correct"
with that group's sensitivity when it is and its false-positive rate when it is not (a crowd that judges
``country`` well and ``employer`` badly).  Latency is log-normal around ``latency`` seconds and recorded on each
answer.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from unpooled.core.annotation.crowd import relation_rates
from unpooled.service.annotation import actions, leasing
from unpooled.service.annotation.models import Annotator, Backend, Kind, Task
from unpooled.service.corpora.models import Corpus, GoldEntity, GoldMention, GoldRelation


@dataclass(frozen=True)
class SimulatedWorker:
    name: str
    accuracy: float = 0.8
    bias: float = 0.0
    latency: float = 10.0
    #: verification rates that depend on the relation
    #: (:func:`~unpooled.core.annotation.crowd.parse_relation_accuracy`); a relation no group names is judged at
    #: ``accuracy`` and ``bias``
    relation_rates: tuple = ()


@dataclass
class SimulationReport:
    answers: int = 0
    by_kind: dict = field(default_factory=lambda: defaultdict(int))
    blocked: list = field(default_factory=list)
    seconds: float = 0.0
    closed: int = 0  # items completed with fewer answers than asked: no unblocked annotator left to answer them

    def to_dict(self) -> dict:
        return {"answers": self.answers, "by_kind": dict(self.by_kind), "blocked": self.blocked,
                "annotator_seconds": round(self.seconds, 1), "closed_short": self.closed}


class GoldOracle:
    """The truth of each task, read from the corpus's gold layer (cached per document)."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self._docs: dict[int, tuple[list, dict]] = {}

    def _doc(self, doc_id: int):
        got = self._docs.get(doc_id)
        if got is None:
            self.load([doc_id])
            got = self._docs[doc_id]
        return got

    def load(self, doc_ids, *, chunk: int = 1000) -> None:
        """Read the gold layer of the documents ``doc_ids`` (pks) not read yet: two queries per ``chunk`` documents
        (a whole corpus's truth read a document at a time was two queries per document: 50,000 documents, 100,000
        queries)."""
        todo = sorted(set(doc_ids) - self._docs.keys())
        for k in range(0, len(todo), chunk):
            part = todo[k:k + chunk]
            mentions: dict[int, list] = {d: [] for d in part}
            rels: dict[int, dict[tuple[int, int], set[str]]] = {d: defaultdict(set) for d in part}
            for d, *m in (GoldMention.objects.filter(document_id__in=part).order_by("document_id", "start", "-end", "pk")
                          .values_list("document_id", "start", "end", "type", "entity_id")):
                mentions[d].append(tuple(m))
            for d, s, p, o in (GoldRelation.objects.filter(document_id__in=part)
                               .values_list("document_id", "subject_id", "predicate", "object_id")):
                rels[d][(s, o)].add(p)
            for d in part:
                self._docs[d] = (mentions[d], rels[d])

    def entity_name(self, entity_id: int) -> str:
        """A gold entity's name, case-folded (what identifies it across documents)."""
        if not hasattr(self, "_names"):
            self._names: dict[int, str] = {}
        got = self._names.get(entity_id)
        if got is None:
            got = self._names[entity_id] = " ".join(
                GoldEntity.objects.filter(pk=entity_id).values_list("name", flat=True).first().split()).casefold()
        return got

    def entities_at(self, doc_id: int, start: int, end: int) -> set[int]:
        mentions, _ = self._doc(doc_id)
        return {e for s, t, _, e in mentions if s < end and start < t}

    def verify(self, task: Task) -> bool:
        if task.is_control:
            return bool(task.control_answer["correct"])
        p = task.payload
        subj = self.entities_at(task.document_id, p["subject"]["start"], p["subject"]["end"])
        obj = self.entities_at(task.document_id, p["object"]["start"], p["object"]["end"])
        _, rels = self._doc(task.document_id)
        return any(p["predicate"] in rels.get((h, t), ()) for h in subj for t in obj)

    def mentions(self, doc_id: int) -> list[dict]:
        """Gold mentions without overlaps (the first, longest of overlapping spans is kept)."""
        mentions, _ = self._doc(doc_id)
        out, last_end = [], -1
        for s, e, typ, ent in mentions:
            if s >= last_end:
                out.append({"start": s, "end": e, "type": typ, "cluster": ent, "link": ""})
                last_end = e
        return out

    def pair_labels(self, doc_id: int, mentions: list[dict], pair) -> list[str]:
        a, b = mentions[pair[0]], mentions[pair[1]]
        ea = self.entities_at(doc_id, a["start"], a["end"])
        eb = self.entities_at(doc_id, b["start"], b["end"])
        _, rels = self._doc(doc_id)
        out = set()
        for x in ea:
            for y in eb:
                out.update(f"ab:{p}" for p in rels.get((x, y), ()))
                out.update(f"ba:{p}" for p in rels.get((y, x), ()))
        return sorted(out)


class SimulatedCrowd:
    """Simulated annotators answering a corpus's open tasks through the normal assignment path."""

    def __init__(self, corpus: Corpus, workers: list[SimulatedWorker], *, rng=None) -> None:
        if not workers:
            raise ValueError("workers: at least one simulated annotator is needed")
        self.corpus = corpus
        self.workers = workers
        self.rng = np.random.default_rng(rng)
        self.oracle = GoldOracle(corpus)
        schema = corpus.schema.schema()
        self.types = sorted(schema.entity_types)
        self.predicates = sorted(r.name for r in schema.canonical_relations)
        self.annotators = [Annotator.objects.get_or_create(backend=Backend.SIMULATED, external_id=w.name)[0]
                           for w in workers]

    @classmethod
    def uniform(cls, corpus: Corpus, k: int, *, accuracy: float = 0.8, bias: float = 0.0, latency: float = 10.0,
                prefix: str = "sim", rng=None, relation_rates: tuple = ()) -> "SimulatedCrowd":
        return cls(corpus, [SimulatedWorker(f"{prefix}-{i + 1:02d}", accuracy, bias, latency, relation_rates)
                            for i in range(k)], rng=rng)

    # ------------------------------------------------------------------ answers
    def answer_verify(self, w: SimulatedWorker, task: Task) -> dict:
        """A verification answer whose *correct* judgement has the worker's error rate (module docs) and whose
        mention judgements are one-coin: each mention (subject; object unless a value) is judged a valid mention
        (it overlaps a gold mention) with accuracy ``1 - (1 - accuracy)/3``, independently of the relation.

        The answer is correct when it says "holds" and both mentions valid; "holds" is said with probability
        ``target / (P(subject said valid) P(object said valid))`` (at most 1), so that the answer is correct with
        the worker's probability ``target`` whenever that is reachable (always for instances whose mentions are
        valid).  The gold layer has no KB links: ``link_ok`` stays unanswered.
        """
        truth = self.oracle.verify(task)
        err = (1 - w.accuracy) * ((1 - w.bias) if truth else (1 + w.bias))
        target = 1 - min(1.0, max(0.0, err)) if truth else min(1.0, max(0.0, err))
        by_relation = relation_rates(w.relation_rates, task.payload.get("predicate", "")) if w.relation_rates else None
        if by_relation is not None:  # P("correct" said) given the truth, for this relation
            target = by_relation[0] if truth else by_relation[1]
        if task.is_control:
            says = self.rng.random() < target
            return {"relation": "holds" if says else "none", "subject_ok": True, "object_ok": True, "link_ok": None}
        # mentions judged as well as the relation's correct items are (so that the target stays reachable)
        acc_m = 1 - (1 - (w.accuracy if by_relation is None else by_relation[0])) / 3
        ok, p_valid = {}, 1.0
        for role in ("subject", "object"):
            arg = task.payload.get(role) or {}
            if arg.get("start") is None or (role == "object" and arg.get("value") is not None):
                ok[role] = True
                continue
            valid = bool(self.oracle.entities_at(task.document_id, arg["start"], arg["end"]))
            ok[role] = valid if self.rng.random() < acc_m else not valid
            p_valid *= acc_m if valid else 1 - acc_m
        holds = self.rng.random() < min(1.0, target / p_valid) if p_valid > 0 else False
        return {"relation": "holds" if holds else "none", "subject_ok": ok["subject"], "object_ok": ok["object"],
                "link_ok": None}

    def answer_entities(self, w: SimulatedWorker, task: Task) -> dict:
        out = []
        fresh = 10 ** 9
        for m in self.oracle.mentions(task.document_id):
            m = dict(m)
            if self.rng.random() < 1 - w.accuracy:
                kind = int(self.rng.integers(3))
                if kind == 0:
                    continue
                if kind == 1:
                    others = [t for t in self.types if t != m["type"]]
                    m["type"] = others[int(self.rng.integers(len(others)))]
                else:
                    fresh += 1
                    m["cluster"] = fresh
            out.append(m)
        return {"mentions": out}

    def answer_relations(self, w: SimulatedWorker, task: Task) -> dict:
        mentions, pairs = task.payload["mentions"], task.payload["pairs"]
        out = {}
        for i, pair in enumerate(pairs):
            labels = self.oracle.pair_labels(task.document_id, mentions, pair)
            if self.rng.random() < 1 - w.accuracy:
                if labels and self.rng.random() < 0.5:
                    labels = labels[:]
                    labels.pop(int(self.rng.integers(len(labels))))
                else:
                    wrong = f"{'ab' if self.rng.random() < 0.5 else 'ba'}:{self.predicates[int(self.rng.integers(len(self.predicates)))]}"
                    labels = sorted(set(labels) | {wrong}) if wrong not in labels else [x for x in labels if x != wrong]
            out[str(i)] = labels
        return {"pairs": out}

    def answer_clusters(self, w: SimulatedWorker, task: Task) -> dict:
        """Group the items by the gold entity their mention overlaps, entities being the same across documents
        when their gold names agree (case-folded; the gold layer has no cross-document identity of its own); with
        probability ``1 - accuracy`` per item, one error: the item is put alone, or into another item's group."""
        items = task.payload.get("items", [])
        key = []
        for k, it in enumerate(items):
            ents = self.oracle.entities_at(it["document"], it["start"], it["end"])
            key.append(self.oracle.entity_name(min(ents)) if ents else f"#alone{k}")
        for k in range(len(items)):
            if self.rng.random() < 1 - w.accuracy:
                key[k] = f"#err{k}" if self.rng.random() < 0.5 or len(items) < 2 else key[int(self.rng.integers(len(items)))]
        groups: dict = {}
        for k, g in enumerate(key):
            groups.setdefault(g, []).append(k)
        return {"groups": list(groups.values())}

    def answer(self, w: SimulatedWorker, task: Task) -> dict:
        if task.kind == Kind.CLUSTERS:
            return self.answer_clusters(w, task)
        if task.kind == Kind.VERIFY:
            return self.answer_verify(w, task)
        if task.kind == Kind.ENTITIES:
            return self.answer_entities(w, task)
        return self.answer_relations(w, task)

    # ------------------------------------------------------------------ loop
    def run(self, *, kinds=None, max_answers: int | None = None, progress=None) -> SimulationReport:
        """Answer open tasks in rounds (annotators in random order) until no annotator can lease one."""
        report = SimulationReport()
        active = list(range(len(self.workers)))
        while active and (max_answers is None or report.answers < max_answers):
            still = []
            # a random order each round, so that items are not always answered by the same trio
            # (fixed cohorts make per-worker confusion matrices poorly identified)
            for i in self.rng.permutation(active).tolist():
                ann = self.annotators[i]
                if ann.blocked:
                    continue
                lease = None
                for kind in (kinds or [None]):
                    lease = leasing.lease_next(ann, kind=kind, corpus=self.corpus, rng=self.rng)
                    if lease is not None:
                        break
                if lease is None:
                    continue
                w = self.workers[i]
                seconds = float(self.rng.lognormal(np.log(w.latency), 0.5))
                actions.submit_answer(lease, self.answer(w, lease.task), seconds=seconds)
                report.answers += 1
                report.by_kind[lease.task.kind] += 1
                report.seconds += seconds
                if progress is not None:
                    progress(1)
                ann.refresh_from_db(fields=["blocked"])
                if ann.blocked:
                    report.blocked.append(ann.external_id)
                else:
                    still.append(i)
                if max_answers is not None and report.answers >= max_answers:
                    break
            active = still
        report.closed = self.close_unreachable(kinds)
        return report

    def close_unreachable(self, kinds=None) -> int:
        """The crowd is a closed pool: an open item that every unblocked annotator of it has answered or leased
        can get no more answers (it asked for more answers than the pool has unblocked annotators, after a block
        or a weak relation's raise); it completes with the counted answers it has rather than stay open for
        ever.  Returns the number of items so closed."""
        live = list(Annotator.objects.filter(pk__in=[a.pk for a in self.annotators], blocked=False)
                    .order_by("pk").values_list("pk", flat=True))
        stuck = leasing.unreachable_items(self.corpus, live, kinds)
        closed = 0
        for task in stuck:  # answers_needed stays: the item is not asked for more again
            actions.complete_task(task)
            closed += 1
        return closed


def verification_accuracy(corpus: Corpus, *, method: str | None = None) -> dict:
    """Accuracy of the current labels of completed verification tasks against the gold layer."""
    oracle = GoldOracle(corpus)
    labels = actions.current_labels(corpus, method=method)
    n = right = 0
    for task in Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, is_control=False, status=Task.Status.COMPLETE):
        lab = labels.get(task.key)
        if lab is None:
            continue
        n += 1
        right += lab.correct == oracle.verify(task)
    return {"items": n, "accuracy": right / n if n else float("nan")}


def exhaustive_accuracy(corpus: Corpus) -> dict:
    """Aggregated entity and relation annotations against the gold layer.

    mentions: share of gold mentions (without overlaps) found with the right span and type;
    mention precision; pairs: share of candidate pairs whose aggregated label set equals the gold set.
    """
    oracle = GoldOracle(corpus)
    gold_n = found = marked = correct = 0
    for task in Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES, status=Task.Status.COMPLETE):
        gold = {(m["start"], m["end"], m["type"]) for m in oracle.mentions(task.document_id)}
        got = {(m["start"], m["end"], m["type"]) for m in task.result["mentions"]}
        gold_n += len(gold)
        found += len(gold & got)
        marked += len(got)
        correct += len(gold & got)
    pairs = pairs_right = 0
    for task in Task.objects.filter(corpus=corpus, kind=Kind.RELATIONS, key="", status=Task.Status.COMPLETE):
        mentions = task.payload.get("mentions", [])
        for i, pair in enumerate(task.payload.get("pairs", [])):
            pairs += 1
            pairs_right += task.result["pairs"].get(str(i), []) == oracle.pair_labels(task.document_id, mentions, pair)
    return {
        "mention_recall": found / gold_n if gold_n else float("nan"),
        "mention_precision": correct / marked if marked else float("nan"),
        "pairs": pairs, "pair_accuracy": pairs_right / pairs if pairs else float("nan"),
        "documents": Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES, status=Task.Status.COMPLETE).count(),
    }

