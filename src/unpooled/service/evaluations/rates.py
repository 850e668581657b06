r"""The service's side of the crowd-noise model: verification answers read from the database, the workers'
confusions fitted on them (memoised, with bootstrap replicates), and the support of :math:`p_0`.

The maths lives in the core: the confusions in :mod:`unpooled.core.annotation.confusion`, the estimator from
the votes in :mod:`unpooled.core.estimators.noisy`.  Here the answers are read incrementally (they are
append-only), the confusions refitted when answers arrive, and the replicates kept between batches:

**Between full bootstraps** the point confusions are refitted exactly as a full fit would (the same
deterministic fit on all answers, so the published point estimates do not depend on the history), but the
``settings.RATE_REPLICATES`` refits are not redone: each stored replicate is moved by the change of the point fit
on the logit scale (:func:`~unpooled.core.annotation.confusion.shifted_replicates`); workers who joined since then get
no deviation.  The replicates' spread stands for the confusions' sampling uncertainty, which shrinks as
:math:`1/n` and barely moves when the answers grow by a few percent.  The full bootstrap is redone (seeded, so
the same as a cold one) when the counted answers have grown by :data:`REBOOTSTRAP_GROWTH`, when the answers are
not the stored ones plus new ones (a discounted answer, a re-created corpus), when the source changes (the first
answered controls), or when none is stored in this process -- and whenever no verification item is open (the
corpus is *settled*): then the replicates are those of a full bootstrap on every answer, so the intervals
published once the labels are in do not depend on the order the answers came in, nor on which worker process
scored them (shifted replicates do: 0.008 on a 90% interval's bound, measured between two workers' histories).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from django.conf import settings

from unpooled.core.annotation.confusion import (
    SHRINKAGE, VerifyAnswers, fit_confusions, keyed_answers as _keyed, model_answers, preferred_source,
    shifted_replicates,
)
from unpooled.core.annotation.relation_groups import relation_stratum_codes
from unpooled.core.estimators.exhaustive import p0_support
from unpooled.core.estimators.noisy import KeyedAnswers
#: a full bootstrap again once the counted answers have grown by this share since the last one
REBOOTSTRAP_GROWTH = 0.10


def verify_answers(corpus, fp: tuple | None = None) -> VerifyAnswers:
    """The corpus's counted verification answers (weight above 0, by annotators not blocked: a blocked
    annotator's answers leave the votes, those to completed items included).  ``fp``: their :func:`_answers_fp`, just read; then the rows
    are kept in memory and only answers with ids above the held ones are read, if the count adds up (answers are
    append-only; a discounted answer, or one committed late under a lower id, makes it re-read them all).

    The rows held are kept parsed too (:class:`_Parsed`): appended rows are parsed onto the held parse, which is
    what parsing all of them in order gives (items, workers and keys are numbered in order of first
    appearance, so rows appended at the end only add to the end)."""
    from unpooled.service.annotation.models import Answer, Kind

    qs = Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, weight__gt=0,
                               annotator__blocked=False).order_by("id")
    cols = ("task_id", "annotator_id", "correct", "task__key", "task__is_control", "task__control_answer", "id",
            "task__group")
    rows = parsed = None
    held = _answer_rows.get(corpus.pk) if fp is not None else None
    if held is not None and held[0] is not None and held[0][:2] == fp[:2]:
        if held[0] == fp:
            rows, parsed = held[1], held[2]
        else:
            fresh = _answer_rows_between(corpus, held[0][3] or 0, fp[3])
            if len(held[1]) + len(fresh) == (fp[2] or 0):
                rows = held[1] + fresh
                parsed = held[2].extended(fresh)
    if rows is None:
        rows = list(qs.values_list(*cols))
        parsed = _Parsed().extended(rows)
    if fp is not None:
        # the fingerprint of what is held, when it is the one read (else the next call reads everything)
        ok = len(rows) == (fp[2] or 0) and (rows[-1][6] if rows else None) == fp[3]
        _answer_rows[corpus.pk] = (fp if ok else None, rows, parsed)
    return parsed.answers(relation_strata(corpus))


def relation_strata(corpus) -> dict[str, int]:
    """The crowd model's strata (:mod:`unpooled.core.estimators.strata`): one per relation of the corpus's schema,
    or per group of relations the organiser said the crowd judges alike (``AnnotationSettings.relation_groups``),
    numbered in name order (a predicate the schema does not name: one more, the last)."""
    from unpooled.core.annotation.relation_groups import grouped_strata

    groups = _groups(corpus)
    key = (corpus.pk, corpus.schema_id, tuple(sorted(groups.items())))
    got = _strata_memo.get(key)
    if got is None:
        names = sorted(r.name for r in corpus.schema.schema().canonical_relations)
        got = _strata_memo[key] = grouped_strata(names, groups)
    return got


_strata_memo: dict = {}


def _groups(corpus) -> dict[str, str]:
    from unpooled.service.annotation.models import AnnotationSettings

    return AnnotationSettings.groups_of(corpus)


@dataclass
class _Parsed:
    """:func:`verify_answers`' parse of answer rows, in row order: items (tasks), workers (annotators) and keys
    numbered in order of first appearance, and per row its item, worker, answer and ids."""

    items: dict = field(default_factory=dict)     # task id -> item index
    workers: dict = field(default_factory=dict)   # annotator id -> worker index
    keys: list = field(default_factory=list)
    control: list = field(default_factory=list)
    relations: list = field(default_factory=list)  # per item, its task's relation (the stratum's)
    it: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    wk: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    yes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    tasks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    anns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def extended(self, rows) -> "_Parsed":
        """This parse with ``rows`` appended (a new object: the arrays of earlier answers are not touched)."""
        items, workers = dict(self.items), dict(self.workers)
        keys, control, relations = list(self.keys), list(self.control), list(self.relations)
        it, wk, yes = [], [], []
        for task, ann, correct, key, is_control, truth, _, relation in rows:
            i = items.get(task)
            if i is None:
                i = items[task] = len(keys)
                keys.append(key)
                control.append(int(bool((truth or {}).get("correct"))) if is_control else -1)
                relations.append(relation)
            it.append(i)
            wk.append(workers.setdefault(ann, len(workers)))
            yes.append(int(bool(correct)))

        def cat(a, b):
            return np.concatenate([a, np.array(b, np.int64)])

        return _Parsed(items, workers, keys, control, relations, cat(self.it, it), cat(self.wk, wk),
                       cat(self.yes, yes), cat(self.ids, [r[6] for r in rows]), cat(self.tasks, [r[0] for r in rows]),
                       cat(self.anns, [r[1] for r in rows]))

    def answers(self, strata: dict) -> VerifyAnswers:
        """The answers, each item in its relation's stratum (``strata``: relation -> stratum; others the last)."""
        st, H, strata = relation_stratum_codes(self.relations, strata)
        return VerifyAnswers(self.it, self.wk, self.yes, list(self.keys), np.array(self.control, np.int64),
                             len(self.workers), self.ids, self.tasks, self.anns, st, H, strata)


#: corpus pk -> (answers' fingerprint or None, the answer rows read, their :class:`_Parsed`)
_answer_rows: dict = {}


def _answer_rows_between(corpus, after: int, upto: int | None) -> list:
    """:func:`verify_answers`' rows of the counted verification answers of ``corpus`` with ids in ``(after, upto]``
    (``upto``: the fingerprint's max id), by id.

    Read as the answers in that id range (by primary key, of any corpus), then their tasks (by primary key),
    keeping those of the corpus: two index lookups whatever the planner believes about the corpus's tasks.
    (As one join, PostgreSQL walked every verification task of the corpus, 25 ms for 150 new answers
    among 25,000, whenever its statistics did not know the corpus yet, as right after a bulk load.)
    """
    from unpooled.service.annotation.models import Answer, Kind, Task

    if upto is None or upto <= after:
        return []
    got = list(Answer.objects.filter(id__gt=after, id__lte=upto, weight__gt=0, annotator__blocked=False).order_by("id")
               .values_list("id", "task_id", "annotator_id", "correct"))
    ids = sorted({r[1] for r in got})
    tasks: dict[int, tuple] = {}
    for i in range(0, len(ids), 500):
        for task, *rest in (Task.objects.filter(id__in=ids[i:i + 500], corpus=corpus, kind=Kind.VERIFY)
                            .values_list("id", "key", "is_control", "control_answer", "group")):
            tasks[task] = tuple(rest)
    return [(task, ann, correct, *tasks[task][:3], aid, tasks[task][3]) for aid, task, ann, correct in got
            if task in tasks]


def _extends(old: VerifyAnswers, new: VerifyAnswers) -> bool:
    """``new`` is ``old`` with answers appended (same answers, items and workers first, in the same order)."""
    n = len(old.item)
    if old.answer_ids is None or new.answer_ids is None or len(new.item) < n or new.n_items < old.n_items:
        return False
    return (np.array_equal(new.answer_ids[:n], old.answer_ids) and np.array_equal(new.task_ids[:n], old.task_ids)
            and np.array_equal(new.annotator_ids[:n], old.annotator_ids) and np.array_equal(new.yes[:n], old.yes)
            and np.array_equal(new.control[:old.n_items], old.control) and new.n_strata == old.n_strata
            and old.relation_strata == new.relation_strata
            and (old.rate_group is None) == (new.rate_group is None)
            and (old.rate_group is None or np.array_equal(old.rate_group, new.rate_group)))



def answers_fp(corpus) -> tuple:
    """Fingerprint of the corpus's counted verification answers: ``(pk, created, count, max id, weight sum,
    relation groups, settled)`` (blocking an annotator changes it: the count falls; regrouping relations changes the
    crowd model's strata, so every fit keyed on it is redone; ``settled``: no verification item is open, see
    :func:`confusions`)."""
    from django.db.models import Count, Max, Sum

    from unpooled.service.annotation.models import Answer, Kind, Task

    a = Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, weight__gt=0,
                              annotator__blocked=False).aggregate(
        n=Count("id"), mx=Max("id"), w=Sum("weight"))
    groups = tuple(sorted(_groups(corpus).items()))
    settled = not Task.objects.filter(corpus=corpus, kind=Kind.VERIFY, status=Task.Status.OPEN,
                                      is_control=False).exists()
    # (pk, created): a re-created corpus is another
    return corpus.pk, corpus.created, a["n"], a["mx"], a["w"], groups, settled


@dataclass
class Confusions:
    """The workers' confusions fitted on ``answers``: the point fit and its replicates."""

    answers: VerifyAnswers
    source: str
    point: tuple            # (sens, fpr)
    reps: list              # [(sens, fpr), ...]
    #: the last full bootstrap the replicates come from: (answers it saw, its point fit, its replicates)
    base: tuple = field(default=None, repr=False)


_memo: dict = {}


def confusions(corpus, fp: tuple | None = None, *, replicates: int | None = None) -> Confusions | None:
    """The corpus's confusions from the core's :func:`~unpooled.core.annotation.confusion.preferred_source`, memoised
    on the answers' fingerprint ``fp`` (read when not given); None without answers.  ``replicates``: the bootstrap's
    refits (``settings.RATE_REPLICATES``, :data:`~unpooled.core.annotation.confusion.REPLICATES` unless set)."""
    if replicates is None:
        replicates = settings.RATE_REPLICATES
    fp = (tuple(fp) if fp is not None else answers_fp(corpus), replicates)
    got = _memo.get(corpus.pk)
    if got is not None and got[0] == fp:
        return got[1]
    answers = verify_answers(corpus, fp[0])
    source = preferred_source(answers, shrinkage=SHRINKAGE)  # the core's choice: semi, or items when the
    if source is not None:                                      # controls disagree with them, or dawid-skene
        answers = model_answers(answers, source)  # strata only where controls anchor them
    base = got[1].base if got is not None and got[1] is not None else None
    settled = fp[0][-1] is True
    if base is not None and (fp[0][:2] != got[0][0][:2] or not _extends(base[0], answers)
                             or len(answers.item) >= (1 + REBOOTSTRAP_GROWTH) * len(base[0].item)
                             or (settled and len(answers.item) != len(base[0].item))):
        base = None
    out = None
    if source is not None:
        if base is not None and base[3] == source:
            fitted = fit_confusions(answers, source, shrinkage=SHRINKAGE, point_only=True)
            if fitted is not None:
                reps = shifted_replicates(base[1], base[2], base[0].n_rates, fitted[0], answers.n_rates)
                out = Confusions(answers, source, fitted[0], reps, base)
        if out is None:
            fitted = fit_confusions(answers, source, replicates=replicates, rng=0, shrinkage=SHRINKAGE)
            if fitted is not None:
                out = Confusions(answers, source, fitted[0], fitted[1] or [],
                                 (answers, fitted[0], fitted[1] or [], source))
    _memo[corpus.pk] = (fp, out)
    return out


def keyed_answers(corpus, fp: tuple | None = None, *, replicates: int | None = None) -> KeyedAnswers | None:
    """The corpus's verification answers by instance key (gold controls left out) with the fitted confusions:
    the core estimator's input (:class:`~unpooled.core.estimators.noisy.KeyedAnswers`); None without answers."""
    c = confusions(corpus, fp, replicates=replicates)
    if c is None:
        return None
    return _keyed(c.answers, c.point, c.reps)


def crowd_fit(corpus) -> list[dict]:
    """The crowd model's fit check per relation (:func:`unpooled.core.annotation.fitcheck.stratum_fits` on the
    fitted confusions), weakest first; [] without answers."""
    from unpooled.core.annotation.fitcheck import stratum_fits

    c = confusions(corpus)
    if c is None:
        return []
    groups = _groups(corpus)
    members: dict[int, list] = {}
    for rel, code in sorted((c.answers.relation_strata or {}).items()):
        members.setdefault(code, []).append(rel)

    def label(stratum: int) -> str:
        rels = members.get(stratum)
        if not rels:  # no strata (no gold controls to anchor them: core.annotation.confusion.model_answers)
            return "(other)" if members else "(all relations)"
        return groups.get(rels[0], rels[0]) if len(rels) == 1 else f"{groups.get(rels[0])} ({', '.join(rels)})"

    rows = [{**f.to_dict(), "relation": label(f.stratum), "relations": members.get(f.stratum, [])}
            for f in stratum_fits(c.answers, *c.point, reps=c.reps)]
    return sorted(rows, key=lambda r: (r["separation"], r["relation"]))


#: a relation is asked for more answers per item when it is weak on at least this many items (fewer: its rates
#: are mostly the other relations')
WEAK_MIN_ITEMS = 10


def weak_relations(corpus) -> frozenset:
    """The relations the crowd judges weakly (:func:`crowd_fit`), on at least :data:`WEAK_MIN_ITEMS` items."""
    return frozenset(r for f in crowd_fit(corpus) if f["weak"] and f["items"] >= WEAK_MIN_ITEMS for r in f["relations"])


# --------------------------------------------------------------------------- p0's support
def sentence_index(corpus) -> dict[str, tuple[list[int], list[int]]]:
    """``doc_id -> (sentence starts, sentence ends)`` from the database."""
    from unpooled.service.corpora.models import Sentence

    out: dict[str, tuple[list[int], list[int]]] = {}
    for d, s, e in (Sentence.objects.filter(document__corpus=corpus).order_by("document_id", "index")
                    .values_list("document__doc_id", "start", "end")):
        got = out.setdefault(d, ([], []))
        got[0].append(s)
        got[1].append(e)
    return out


_sentence_memo: dict = {}
_inside_memo: dict = {}


def corpus_key(corpus) -> tuple:
    """What identifies a loaded corpus's documents (they never change after loading): the key of every memo of them."""
    return corpus.pk, corpus.created, corpus.n_documents, corpus.n_sentences


def sentences(corpus):
    """:func:`sentence_index`, kept per corpus (sentences do not change after loading)."""
    key = corpus_key(corpus)
    got = _sentence_memo.get(key)
    if got is None:
        got = _sentence_memo[key] = sentence_index(corpus)
    return got


def inside(corpus, refs, found: set, *, protocol: str = "sentence") -> np.ndarray:
    """Per instance (an :class:`~unpooled.core.matching.InstanceRef`), whether it is in :math:`p_0`'s support
    (:func:`unpooled.core.estimators.exhaustive.p0_support`, memoised per key under the corpus's sentence split):
    under the ``sentence`` recall protocol found by the exhaustive protocol (its key in ``found``) or within one
    sentence; under ``document`` every instance.  No document population is
    given: a corpus's submissions, draws and labels are all its own (a period on a next corpus starts a new pool),
    so every drawn instance lies in one of its documents."""
    skey = corpus_key(corpus)
    memo = _inside_memo.get(skey)
    if memo is None:
        _inside_memo.clear()
        memo = _inside_memo[skey] = {}
    if protocol == "document":
        return p0_support(refs, found=found, protocol=protocol)
    return p0_support(refs, found=found, sentences=sentences(corpus), memo=memo)


_entity_memo: dict = {}


def entities(corpus) -> dict[str, list[tuple[int, int, int]]]:
    """The mentions of the corpus's entity clusters, ``doc_id -> [(start, end, cluster)]``
    (:data:`unpooled.core.estimators.exhaustive.EntityMentions`; the corpus's gold entity layer, DocRED's
    vertexSet), kept per corpus (it does not change after loading): the document recall protocol's fact identity."""
    from unpooled.service.corpora.models import GoldMention

    key = corpus_key(corpus)
    got = _entity_memo.get(key)
    if got is None:
        got = {}
        for d, s, e, c in (GoldMention.objects.filter(document__corpus=corpus).order_by("document_id", "start", "id")
                           .values_list("document__doc_id", "start", "end", "entity_id")):
            got.setdefault(d, []).append((s, e, c))
        _entity_memo.clear()
        _entity_memo[key] = got
    return got


def clear_cache() -> None:
    """Forget the memoised answers, confusions and sentence splits (tests; coverage trials, whose rolled-back
    rows reappear under the same ids)."""
    _memo.clear()
    _answer_rows.clear()
    _strata_memo.clear()
    _sentence_memo.clear()
    _inside_memo.clear()
    _entity_memo.clear()


def recall_protocol(corpus) -> str:
    """The corpus's recall protocol (:attr:`~unpooled.service.annotation.models.AnnotationSettings.recall_protocol`):
    which true instances recall counts, and which exhaustive relations layers :func:`exhaustive_truth` reads."""
    from unpooled.service.annotation.models import AnnotationSettings

    got = AnnotationSettings.objects.filter(corpus=corpus).values_list("recall_protocol", flat=True).first()
    return got or "sentence"
