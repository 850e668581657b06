r"""Crowd-label correction and intervals that carry the uncertainty of the annotation error rates.

A verification label is the strict majority *y* of *k* answers.  Given the item's true class *z*,
:math:`t = P(y = 1 \mid z = 1)` and :math:`f = P(y = 1 \mid z = 0)`; the corrected label
:math:`(y - f) / (t - f)` has expectation *z* (Rogan & Gladen 1978), so the estimators, linear
in the labels (ratios of linear terms for recall), keep their targets.  *t* and *f* of an item
follow from its annotators' confusions by summing over their votes (Poisson-binomial).

**Where the confusions come from** (``source``):

``controls``
    gold control items (:func:`unpooled.service.annotation.actions.create_verify_controls`):
    each annotator's sensitivity and false-positive rate from their control answers.
    Independent of the items scored, but few: ~40 control answers per annotator at a control
    share of 0.1.
``dawid-skene``
    Dawid–Skene over every verification answer (controls as unlabelled items): no cost, but
    poorly identified with three answers per item and one dominant class (its fixed point
    moved with the class prior's treatment by 0.1 in the false-positive rate).
``semi``
    Dawid–Skene with the controls' known truth held fixed (semi-supervised): the controls
    anchor the confusions, every other answer adds to them.  The service's choice
    (:data:`PREFERENCE`), with ``dawid-skene`` when no control has been answered.

Each annotator's rates are shrunk towards the crowd's by empirical Bayes (:func:`_shrunk`): a
crowd whose annotators do not differ measurably is pooled, one with a spammer is not.

**Intervals.** The estimators' own variance (:mod:`unpooled.core.estimators.joint`) treats the
rates as known.  Here the point estimates are the core's, and the variance adds
:math:`\mathrm{Var}_{\hat\theta}`, the spread of the estimates over ``replicates`` re-estimates of
the rates (a bootstrap of the control answers, by annotator and class, or of the verification
items for Dawid–Skene): the law of total variance, with the rates' sampling distribution in
place of the delta method's linearisation (Greenland, *Stat. Med.* 7:745-757, 1988, for the
delta-method version).  Two more corrections, both on recall:

* the exhaustive sample :math:`\hat Y_0` is a sample of *documents*: the variance of
  :math:`\hat\theta` is that of a cluster sample (document totals of the linearised Hájek
  ratio), not of independent instances;
* :math:`p_0` is a distribution over the true instances the exhaustive protocol can find,
  which pairs mentions *within one sentence*; a pooled true instance whose subject and object
  lie in different sentences is outside its support, so its :math:`p_0` weight is 0 in
  :math:`\hat\nu_i` (with weight 1 a cross-sentence fact dilutes every other system's share:
  the spaCy baseline's recall was estimated at 0.022 against a true 0.049).

The precision interval is Wilson's on the scale of the *uncorrected* labels, mapped back
(:func:`interval`, ``raw-wilson``).

**Measured** (``unpooled evaluate --coverage-trials``, :mod:`.coverage`; 25 runs of the whole
pipeline on Re-DocRED dev: DocRED-original (true P/R/F1 0.996/0.222/0.363) and the spaCy baseline
(0.650/0.049/0.091), 300 draws each, 30 exhaustive documents, 5 simulated annotators of accuracy
0.8, 100 gold controls offered at a share of 0.1).  Coverage of the 90% intervals, P/R/F1:

==========================================  ==================  ==================
method                                      spaCy baseline      DocRED-original
==========================================  ==================  ==================
before (Dawid–Skene rates, core intervals)  0.84 / 0.00 / 0.00  0.64 / 0.64 / 0.64
no correction                               0.64 / 0.00 / 0.00  0.00 / 0.60 / 0.64
gold-control rates, rate bootstrap, recall  0.96 / 0.92 / 0.92  0.96 / 0.96 / 0.96
semi-supervised, rate bootstrap, recall     0.92 / 0.92 / 0.92  1.00 / 0.96 / 0.96
==========================================  ==================  ==================

The last row is the service's; its mean errors are within one standard error of 0 except the
baseline's recall and F1 (−0.004 ± 0.002 and −0.007 ± 0.003: pooled true instances inside one
sentence but not at the mentions the protocol pairs still dilute :math:`\hat\nu_i`), and its
precision intervals are
0.07 (DocRED-original) and 0.14 wide, against 0.14 and 0.18 from controls alone.
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

#: annotators' confusions are shrunk towards the crowd's: empirical Bayes (or a number of answers, as
#: Dawid–Skene's τ = 5 in the core)
SHRINKAGE = "eb"
#: items whose rates are closer than this keep their plain label (the correction would explode)
MIN_GAP = 0.3
SOURCES = ("controls", "dawid-skene", "semi")


# --------------------------------------------------------------------------- answers
@dataclass(frozen=True)
class VerifyAnswers:
    """Counted verification answers of a corpus, as arrays (one row per answer)."""

    item: np.ndarray        # item index
    worker: np.ndarray      # worker index
    yes: np.ndarray         # 1: the answer says "correct"
    item_keys: list         # per item: the instance key (controls: their control key)
    control: np.ndarray     # per item: -1 not a control, else the control's true class (0/1)
    n_workers: int
    #: per answer, the database ids of the answer, its task and its annotator (None: not from the database)
    answer_ids: np.ndarray | None = None
    task_ids: np.ndarray | None = None
    annotator_ids: np.ndarray | None = None

    @property
    def n_items(self) -> int:
        return len(self.item_keys)


def verify_answers(corpus, fp: tuple | None = None) -> VerifyAnswers:
    """The corpus's counted verification answers.  ``fp``: their :func:`_answers_fp`, just read; then the rows
    are kept in memory and only answers with ids above the held ones are read, if the count adds up (answers are
    append-only; a discounted answer, or one committed late under a lower id, makes it re-read them all).

    The rows held are kept parsed too (:class:`_Parsed`): appended rows are parsed onto the held parse, which is
    what parsing all of them in order gives (items, workers and keys are numbered in order of first
    appearance, so rows appended at the end only add to the end)."""
    from unpooled.service.annotation.models import Answer, Kind

    qs = Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, weight__gt=0).order_by("id")
    cols = ("task_id", "annotator_id", "correct", "task__key", "task__is_control", "task__control_answer", "id")
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
    return parsed.answers()


@dataclass
class _Parsed:
    """:func:`verify_answers`' parse of answer rows, in row order: items (tasks), workers (annotators) and keys
    numbered in order of first appearance, and per row its item, worker, answer and ids."""

    items: dict = field(default_factory=dict)     # task id -> item index
    workers: dict = field(default_factory=dict)   # annotator id -> worker index
    keys: list = field(default_factory=list)
    control: list = field(default_factory=list)
    it: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    wk: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    yes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    tasks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    anns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def extended(self, rows) -> "_Parsed":
        """This parse with ``rows`` appended (a new object: the arrays of earlier answers are not touched)."""
        items, workers = dict(self.items), dict(self.workers)
        keys, control = list(self.keys), list(self.control)
        it, wk, yes = [], [], []
        for task, ann, correct, key, is_control, truth, _ in rows:
            i = items.get(task)
            if i is None:
                i = items[task] = len(keys)
                keys.append(key)
                control.append(int(bool((truth or {}).get("correct"))) if is_control else -1)
            it.append(i)
            wk.append(workers.setdefault(ann, len(workers)))
            yes.append(int(bool(correct)))

        def cat(a, b):
            return np.concatenate([a, np.array(b, np.int64)])

        return _Parsed(items, workers, keys, control, cat(self.it, it), cat(self.wk, wk), cat(self.yes, yes),
                       cat(self.ids, [r[6] for r in rows]), cat(self.tasks, [r[0] for r in rows]),
                       cat(self.anns, [r[1] for r in rows]))

    def answers(self) -> VerifyAnswers:
        return VerifyAnswers(self.it, self.wk, self.yes, list(self.keys), np.array(self.control, np.int64),
                             len(self.workers), self.ids, self.tasks, self.anns)


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
    got = list(Answer.objects.filter(id__gt=after, id__lte=upto, weight__gt=0).order_by("id")
               .values_list("id", "task_id", "annotator_id", "correct"))
    ids = sorted({r[1] for r in got})
    tasks: dict[int, tuple] = {}
    for i in range(0, len(ids), 500):
        for task, *rest in (Task.objects.filter(id__in=ids[i:i + 500], corpus=corpus, kind=Kind.VERIFY)
                            .values_list("id", "key", "is_control", "control_answer")):
            tasks[task] = tuple(rest)
    return [(task, ann, correct, *tasks[task], aid) for aid, task, ann, correct in got if task in tasks]


def _extends(old: VerifyAnswers, new: VerifyAnswers) -> bool:
    """``new`` is ``old`` with answers appended (same answers, items and workers first, in the same order)."""
    n = len(old.item)
    if old.answer_ids is None or new.answer_ids is None or len(new.item) < n or new.n_items < old.n_items:
        return False
    return (np.array_equal(new.answer_ids[:n], old.answer_ids) and np.array_equal(new.task_ids[:n], old.task_ids)
            and np.array_equal(new.annotator_ids[:n], old.annotator_ids) and np.array_equal(new.yes[:n], old.yes)
            and np.array_equal(new.control[:old.n_items], old.control))


# --------------------------------------------------------------------------- confusions
def between_worker_variance(yes_c: np.ndarray, n_c: np.ndarray) -> float:
    r"""Method-of-moments variance of a rate between workers (beta-binomial; DerSimonian–Laird form).

    :math:`\hat\sigma^2_b = \max\bigl(0, [\sum_w n_w(\hat p_w - \bar p)^2 - \bar p(1-\bar p)(W-1)]
    / [N - \sum_w n_w^2 / N]\bigr)` over the :math:`W` workers with answers, :math:`N = \sum_w n_w`.
    """
    ok = n_c > 0
    W = int(ok.sum())
    N = float(n_c[ok].sum())
    if W < 2 or N <= 0:
        return 0.0
    pbar = yes_c[ok].sum() / N
    ph = yes_c[ok] / n_c[ok]
    num = float((n_c[ok] * (ph - pbar) ** 2).sum()) - pbar * (1 - pbar) * (W - 1)
    den = N - float((n_c[ok] ** 2).sum()) / N
    return max(0.0, num / den) if den > 0 else 0.0


#: bounds of the empirical-Bayes prior strength (answers' worth)
EB_MIN, EB_MAX = 1.0, 1e4


def _shrunk(yes_c: np.ndarray, n_c: np.ndarray, shrinkage, smoothing: float = 0.01) -> np.ndarray:
    """Per worker ``(yes + s + τ·pooled) / (n + 2s + τ)`` with the pooled rate ``(Σyes + s) / (Σn + 2s)``.

    ``shrinkage`` τ in answers, or ``'eb'``: empirical Bayes, τ = p̄(1 − p̄)/σ²_b − 1 from the
    between-worker variance (:func:`between_worker_variance`), so a crowd whose workers do not
    differ measurably is pooled and one with a spammer is not.
    """
    pooled = (yes_c.sum() + smoothing) / (n_c.sum() + 2 * smoothing)
    if shrinkage == "eb":
        var_b = between_worker_variance(yes_c, n_c)
        tau = EB_MAX if var_b <= 0 else float(np.clip(pooled * (1 - pooled) / var_b - 1, EB_MIN, EB_MAX))
    else:
        tau = float(shrinkage)
    return (yes_c + smoothing + tau * pooled) / (n_c + 2 * smoothing + tau)


def control_confusions(a: VerifyAnswers, weights: np.ndarray | None = None, *, shrinkage=SHRINKAGE
                       ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per worker (sensitivity, false-positive rate) from control answers; None without both kinds of controls.

    ``weights``: per-answer multiplicities (a bootstrap replicate).
    """
    w = np.ones(len(a.item)) if weights is None else weights
    truth = a.control[a.item]
    rates = []
    for z in (1, 0):
        sel = truth == z
        if not (sel & (w > 0)).any():
            return None
        n_c = np.bincount(a.worker[sel], weights=w[sel], minlength=a.n_workers)
        y_c = np.bincount(a.worker[sel], weights=(w * a.yes)[sel], minlength=a.n_workers)
        rates.append(_shrunk(y_c, n_c, shrinkage))
    return rates[0], rates[1]


def ds_confusions(a: VerifyAnswers, item_weights: np.ndarray | None = None, *, clamp_controls: bool = False,
                  shrinkage=SHRINKAGE, max_iter: int = 200, tol: float = 1e-7
                  ) -> tuple[np.ndarray, np.ndarray]:
    r"""Binary Dawid–Skene by EM: per worker (sensitivity, false-positive rate).

    As :func:`unpooled.core.annotation.dawid_skene` (each worker's confusion shrunk towards the
    pooled one by ``shrinkage`` answers), plus item multiplicities (``item_weights``, for the
    bootstrap) and, with ``clamp_controls``, controls held at their known class.  The class prior
    is fitted on the non-control items only (controls are balanced by construction).
    """
    sens, fpr, _ = _ds_fit(a, item_weights, clamp_controls=clamp_controls, shrinkage=shrinkage, max_iter=max_iter,
                           tol=tol)
    return sens, fpr


def _ds_fit(a: VerifyAnswers, item_weights=None, *, clamp_controls: bool = False, shrinkage=SHRINKAGE,
            max_iter: int = 200, tol: float = 1e-7, init: np.ndarray | None = None):
    """:func:`ds_confusions` returning the posteriors too; ``init``: posteriors to start from (else vote shares)."""
    n_i = a.n_items
    iw = np.ones(n_i) if item_weights is None else np.asarray(item_weights, float)
    om = iw[a.item]
    fixed = (a.control >= 0) if clamp_controls else np.zeros(n_i, bool)
    real = a.control < 0
    votes = np.bincount(a.item, weights=a.yes, minlength=n_i)
    total = np.bincount(a.item, minlength=n_i)
    T = np.where(total > 0, votes / np.maximum(total, 1), 0.5) if init is None else np.asarray(init, float)
    T = np.where(fixed, a.control, T).astype(float)
    said = a.yes == 1
    wr = iw * real
    wr_sum = max(wr.sum(), 1e-12)
    prev = -np.inf
    sens = fpr = None
    for _ in range(max_iter):
        # M step
        rho = float(np.clip((wr * T).sum() / wr_sum, 1e-6, 1 - 1e-6))
        t_a = T[a.item]
        w1, w0 = om * t_a, om * (1 - t_a)
        n1 = np.bincount(a.worker, weights=w1, minlength=a.n_workers)
        y1 = np.bincount(a.worker, weights=w1 * a.yes, minlength=a.n_workers)
        n0 = np.bincount(a.worker, weights=w0, minlength=a.n_workers)
        y0 = np.bincount(a.worker, weights=w0 * a.yes, minlength=a.n_workers)
        sens, fpr = _shrunk(y1, n1, shrinkage), _shrunk(y0, n0, shrinkage)
        # E step (the logarithms once per worker, not per answer: the same values)
        l1 = np.where(said, np.log(sens)[a.worker], np.log1p(-sens)[a.worker])
        l0 = np.where(said, np.log(fpr)[a.worker], np.log1p(-fpr)[a.worker])
        s1 = np.bincount(a.item, weights=l1, minlength=n_i) + math.log(rho)
        s0 = np.bincount(a.item, weights=l0, minlength=n_i) + math.log1p(-rho)
        m = np.maximum(s1, s0)
        ll = float((wr * (m + np.log(np.exp(s1 - m) + np.exp(s0 - m)))).sum())
        T = np.where(fixed, a.control, 1.0 / (1.0 + np.exp(s0 - s1)))
        if math.isfinite(prev) and abs(ll - prev) <= tol * max(1.0, abs(prev)):
            break
        prev = ll
    return sens, fpr, T


def core_ds_confusions(a: VerifyAnswers) -> tuple[np.ndarray, np.ndarray]:
    """The confusions ``majority_error_rates`` used before (core Dawid–Skene, controls unlabelled)."""
    from unpooled.core.annotation import Answers, dawid_skene

    ans = Answers.from_arrays(a.item, a.worker, a.yes, n_items=a.n_items, n_workers=a.n_workers, n_classes=2)
    fit = dawid_skene(ans, n_classes=2)
    return fit.confusion[:, 1, 1], fit.confusion[:, 0, 1]


# --------------------------------------------------------------------------- majority rates
def majority_yes(p_yes: np.ndarray) -> np.ndarray:
    """P(strict majority says yes) for rows of independent voters' yes-probabilities (``(K, n)``)."""
    K, n = p_yes.shape
    P = np.ascontiguousarray(np.asarray(p_yes, float).T)  # (n, K): contiguous rows, the same arithmetic
    dist = np.zeros((n + 1, K))
    dist[0] = 1.0
    for j in range(n):
        q = P[j]
        dist[1:] = dist[1:] * (1 - q) + dist[:-1] * q
        dist[0] *= 1 - q
    return dist[n // 2 + 1:].sum(axis=0)  # ties are "not correct" (complete_task)


@dataclass
class KeyWorkers:
    """The workers behind each labelled key's majority label, grouped by their number."""

    keys: list
    groups: list = field(default_factory=list)   # (row indices into keys, (K, n) worker indices)

    @classmethod
    def from_answers(cls, a: VerifyAnswers) -> "KeyWorkers":
        """Keys in order of their first answer (controls left out), each with its workers in answer order."""
        item = np.asarray(a.item, np.int64)
        sel = np.asarray(a.control)[item] < 0
        it, ws = item[sel], np.asarray(a.worker, np.int64)[sel]
        # the items answered, in order of their first answer; their keys numbered in that order
        got, first = np.unique(it, return_index=True)
        by_first = got[np.argsort(first, kind="stable")].tolist()
        codes: dict[str, int] = {}
        of_item = np.full(a.n_items, -1, np.int64)
        of_item[by_first] = [codes.setdefault(a.item_keys[i], len(codes)) for i in by_first]
        kc = of_item[it]
        keys = list(codes)
        out = cls(keys)
        if not len(kc):
            return out
        order = np.argsort(kc, kind="stable")  # answers by key, in answer order within a key
        counts = np.bincount(kc, minlength=len(keys))
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        for n in np.unique(counts).tolist():
            rows = np.flatnonzero(counts == n)
            out.groups.append((rows, ws[order[starts[rows][:, None] + np.arange(n)[None, :]]]))
        return out

    def rates(self, sens: np.ndarray, fpr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per key (t, f) of its majority label."""
        t = np.zeros(len(self.keys))
        f = np.zeros(len(self.keys))
        for rows, ws in self.groups:
            t[rows] = majority_yes(sens[ws])
            f[rows] = majority_yes(fpr[ws])
        return t, f

    def rates_many(self, sens: np.ndarray, fpr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`rates` of every row of ``(R, W)`` confusions at once: ``(R, K)`` (t, f); the same numbers."""
        R = sens.shape[0]
        t = np.zeros((R, len(self.keys)))
        f = np.zeros((R, len(self.keys)))
        for rows, ws in self.groups:
            # keys answered by the same workers (in the same order) have the same rates: once per worker tuple
            uniq, inv = _unique_rows(ws)
            K, n = uniq.shape
            t[:, rows] = majority_yes(sens[:, uniq].reshape(R * K, n)).reshape(R, K)[:, inv]
            f[:, rows] = majority_yes(fpr[:, uniq].reshape(R * K, n)).reshape(R, K)[:, inv]
        return t, f


def _unique_rows(ws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(ws, axis=0, return_inverse=True)`` of non-negative integer rows, through one integer code per
    row (its digits in base ``max + 1``: the same order) when the codes fit in 62 bits."""
    K, n = ws.shape
    base = int(ws.max()) + 1 if ws.size else 1
    if not ws.size or n * math.log2(max(base, 2)) >= 62:
        uniq, inv = np.unique(ws, axis=0, return_inverse=True)
        return uniq, inv.reshape(-1)
    code = np.zeros(K, np.int64)
    for j in range(n):
        code = code * base + ws[:, j]
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    return ws[first], inv.reshape(-1)


@dataclass
class ErrorRates:
    """Per labelled key, the majority label's (t, f), and ``replicates`` re-estimates of them."""

    keys: list
    t: np.ndarray
    f: np.ndarray
    source: str
    t_rep: np.ndarray | None = None   # (B, K)
    f_rep: np.ndarray | None = None
    min_gap: float = MIN_GAP

    def as_dict(self) -> dict[str, tuple[float, float]]:
        """``{key: (t, f)}`` for the keys whose rates are far enough apart (``majority_error_rates``' form)."""
        ok = self.t - self.f >= self.min_gap
        return {k: (float(t), float(f)) for k, t, f, g in zip(self.keys, self.t, self.f, ok) if g}


def error_rates(corpus, *, source: str = "controls", replicates: int = 0, rng=0, min_gap: float = MIN_GAP,
                answers: VerifyAnswers | None = None, shrinkage=SHRINKAGE) -> ErrorRates | None:
    """Majority-label error rates of every labelled key of the corpus, from ``source`` (module docs).

    ``controls`` and ``semi`` need answered controls of both classes, else None.  ``replicates``
    re-estimates by bootstrap (control answers by worker and class; verification items by kind).
    """
    if source not in SOURCES:
        raise ValueError(f"source: expected one of {', '.join(SOURCES)}, got {source!r}")
    a = verify_answers(corpus) if answers is None else answers
    got = _fit_confusions(a, source, replicates=replicates, rng=rng, shrinkage=shrinkage)
    if got is None:
        return None
    return _rates_of(KeyWorkers.from_answers(a), *got, source, min_gap=min_gap)


def _rates_of(kw: KeyWorkers, point, reps, source: str, *, min_gap: float = MIN_GAP) -> ErrorRates:
    """Per-key :class:`ErrorRates` from per-worker confusions: the point ``(sens, fpr)`` and the replicates'
    (a list of them, or None for no replicates)."""
    t, f = kw.rates(*point)
    out = ErrorRates(kw.keys, t, f, source, min_gap=min_gap)
    if reps is not None:
        if reps:
            out.t_rep, out.f_rep = kw.rates_many(np.array([r[0] for r in reps]), np.array([r[1] for r in reps]))
        else:
            out.t_rep, out.f_rep = np.array([]), np.array([])
    return out


def _fit_confusions(a: VerifyAnswers, source: str, *, replicates: int = 0, rng=0, shrinkage=SHRINKAGE,
                    point_only: bool = False):
    """Per-worker confusions of ``source``: ``(point (sens, fpr), replicates [(sens, fpr), ...] or None)``;
    None when the source is not available (no answers; ``controls``/``semi`` without both kinds of controls).

    ``point_only``: the point fit alone (replicates None).
    """
    if source not in SOURCES:
        raise ValueError(f"source: expected one of {', '.join(SOURCES)}, got {source!r}")
    if not len(a.item):
        return None
    if source == "controls":
        got = control_confusions(a, shrinkage=shrinkage)
        if got is None:
            return None
        fit = lambda w: control_confusions(a, w, shrinkage=shrinkage)  # noqa: E731
    else:
        if source == "semi" and not ((a.control == 0).any() and (a.control == 1).any()):
            return None
        clamp = source == "semi"
        *got, post = _ds_fit(a, clamp_controls=clamp, shrinkage=shrinkage)
        # replicates start from the full-data posteriors (a warm start: the same fixed point, fewer iterations)
        fit = lambda w: _ds_fit(a, w, clamp_controls=clamp, shrinkage=shrinkage, init=post)[:2]  # noqa: E731
    point = tuple(got)
    if point_only or not replicates:
        return point, None
    gen = np.random.default_rng(rng)
    reps = []
    for _ in range(replicates):
        w = _bootstrap_answers(a, gen) if source == "controls" else _bootstrap_items(a, gen)
        conf = fit(w)
        if conf is not None:
            reps.append(tuple(conf))
    return point, reps


def _bootstrap_answers(a: VerifyAnswers, gen) -> np.ndarray:
    """Multiplicities of the control answers, resampled within (worker, true class); other answers 0."""
    w = np.zeros(len(a.item))
    truth = a.control[a.item]
    strata = np.where(truth >= 0, a.worker * 2 + truth, -1)
    for s in np.unique(strata[strata >= 0]):
        idx = np.flatnonzero(strata == s)
        w[idx] = np.bincount(gen.integers(0, len(idx), len(idx)), minlength=len(idx))
    return w


def _bootstrap_items(a: VerifyAnswers, gen) -> np.ndarray:
    """Multiplicities of the items, resampled within controls and non-controls."""
    w = np.zeros(a.n_items)
    for sel in (a.control < 0, a.control >= 0):
        idx = np.flatnonzero(sel)
        if len(idx):
            w[idx] = np.bincount(gen.integers(0, len(idx), len(idx)), minlength=len(idx))
    return w


def corrected(y: np.ndarray, t: np.ndarray, f: np.ndarray, min_gap: float = MIN_GAP) -> np.ndarray:
    """Rogan–Gladen ``(y - f) / (t - f)`` where ``t - f >= min_gap``, else ``y``."""
    ok = t - f >= min_gap
    return np.where(ok, (y - f) / np.where(ok, t - f, 1.0), y)


# --------------------------------------------------------------------------- scoring
def sentence_index(corpus) -> dict[str, tuple[list[int], list[int]]]:
    """``doc_id -> (sentence starts, sentence ends)``."""
    from unpooled.service.corpora.models import Sentence

    out: dict[str, tuple[list[int], list[int]]] = {}
    for d, s, e in (Sentence.objects.filter(document__corpus=corpus).order_by("document_id", "index")
                    .values_list("document__doc_id", "start", "end")):
        got = out.setdefault(d, ([], []))
        got[0].append(s)
        got[1].append(e)
    return out


def within_sentence(ref, sentences) -> bool:
    """Both arguments of the instance lie inside one sentence (string fillers: the subject does);
    the core's :func:`unpooled.core.estimators.exhaustive.within_sentence`, shared with the offline path."""
    from unpooled.core.estimators.exhaustive import within_sentence as _within

    return _within(ref, sentences)


INTERVALS = ("wilson", "wald", "raw-wilson")


@dataclass
class Estimates:
    """Per system: estimates, variances (sampling, and from the error rates) and what intervals need."""

    systems: tuple
    est: dict                # metric -> (m,) point estimates
    var: dict                # metric -> (m,) sampling variance (rates known)
    var_rates: dict          # metric -> (m,) variance from the error-rate re-estimates (0 without)
    fallback: dict           # metric -> (m,) sample size for the Wilson interval near 0 or 1
    t_bar: np.ndarray        # (m,) mean majority rates behind each system's precision (1 and 0: uncorrected)
    f_bar: np.ndarray
    ess: np.ndarray
    labels: np.ndarray
    #: (kind, rates, confidence) -> :meth:`intervals`' result: every system's row reads the same arrays
    _ci: dict = field(default_factory=dict, repr=False, compare=False)

    def intervals(self, kind: str = "raw-wilson", *, rates: bool = True, confidence: float = 0.90) -> dict:
        """metric -> (lo, hi), by ``kind`` (:func:`interval`), with or without the rates' variance.

        Computed once per ``(kind, rates, confidence)`` and kept (the estimates are not changed after
        construction), so :meth:`row` for every system costs one computation, not one per system.
        """
        key = (kind, bool(rates), float(confidence))
        got = self._ci.get(key)
        if got is not None:
            return got
        out = {}
        for k in ("p", "r", "f1"):
            v = self.var[k] + (self.var_rates[k] if rates else 0.0)
            if k == "p":
                out[k] = interval(self.est[k], v, self.fallback[k], kind, confidence, self.t_bar, self.f_bar)
            else:
                out[k] = interval(self.est[k], v, self.fallback[k], "wald" if kind == "wald" else "wilson", confidence)
        self._ci[key] = out
        return out

    def row(self, i: int, kind: str = "raw-wilson", *, rates: bool = True, confidence: float = 0.90) -> dict:
        ci = self.intervals(kind, rates=rates, confidence=confidence)
        out = {}
        for k in ("p", "r", "f1"):
            out[k] = float(self.est[k][i])
            out[f"{k}_lo"], out[f"{k}_hi"] = float(ci[k][0][i]), float(ci[k][1][i])
            out[f"{k}_se"] = float(np.sqrt(self.var[k][i]))
            out[f"{k}_se_rates"] = float(np.sqrt(self.var_rates[k][i])) if rates else 0.0
        return out


def interval(est, var, n_fallback, kind: str, confidence: float = 0.90, t_bar=None, f_bar=None):
    r"""Two-sided interval of a proportion-like estimate with variance ``var``.

    ``wilson``: the core's Wilson score interval at the effective size :math:`\hat e(1-\hat e)/\mathrm{Var}`.
    ``wald``: :math:`\hat e \pm z\sqrt{\mathrm{Var}}`, clipped to [0, 1].
    ``raw-wilson``: for a precision from corrected labels, the Wilson interval on the scale of the
    *uncorrected* labels, :math:`\bar y = \bar f + \hat e(\bar t - \bar f)` (a proportion of hard
    labels, whose skew near 0 and 1 Wilson models), mapped back by the correction, which is linear
    (Reiczigel, Földi & Ózsvári, *Epidemiol. Infect.* 138:1674-1678, 2010, for the known-rates case).
    On the corrected scale, the estimator's variance is inflated by label noise, so Wilson's
    effective size there is small and pulls the interval of a near-perfect system down (DocRED's
    0.9963 fell above [0.887, 0.994]).  Without correction (``t_bar`` 1, ``f_bar`` 0) it is ``wilson``.
    """
    from scipy.stats import norm

    from unpooled.core.estimators.joint import wilson

    est = np.asarray(est, float)
    var = np.asarray(var, float)
    if kind == "wilson":
        return wilson(est, var, confidence, n_fallback)
    if kind == "wald":
        z = norm.ppf(0.5 + confidence / 2)
        h = z * np.sqrt(np.maximum(var, 0))
        c = np.clip(est, 0, 1)  # centred on the clipped estimate, as raw-wilson
        return np.clip(c - h, 0, 1), np.clip(c + h, 0, 1)
    if kind != "raw-wilson":
        raise ValueError(f"kind: expected one of {', '.join(INTERVALS)}, got {kind!r}")
    gap = np.maximum(t_bar - f_bar, 1e-9)
    # centred on the estimate clipped to [0, 1]: a corrected estimate beyond a bound would otherwise map to an
    # interval lying wholly outside it, clipped to the single point (an estimate of 1.07 gave [1, 1])
    c = np.clip(est, 0, 1)
    ybar = f_bar + c * gap
    lo, hi = wilson(ybar, var * gap ** 2, confidence, n_fallback)
    lo = np.clip((lo - f_bar) / gap, 0, 1)
    hi = np.clip((hi - f_bar) / gap, 0, 1)
    return np.minimum(lo, c), np.maximum(hi, c)


def score_data(data, *, level: str = "instance", weights: str = "balance", match: str = "overlap",
               y: np.ndarray | None = None, rates: ErrorRates | None = None,
               sentences=None, cluster_docs: bool = True, documents: int | None = None,
               built=None) -> Estimates:
    r"""Joint estimates of every system of ``data`` (:class:`unpooled.core.offline.OfflineData`).

    ``data.labels`` are used as given unless ``y`` (the hard labels of the draws, in
    ``data.labels`` order) and ``rates`` are given: then each label is the corrected
    :func:`corrected` ``(y, t, f)`` of its key.  ``built``: ``build_design(data, ...)``'s result,
    when already made (only the labels change between methods).  The rest is :func:`score_design`.
    """
    from unpooled.core.offline import build_design

    design, universe = built if built is not None else build_design(data, level=level, match=match,
                                                                    corrected_labels=True)
    inside = None
    if sentences is not None and len(design.xs):
        inside = np.array([within_sentence(universe[u], sentences) for u in design.xs.tolist()])
    return score_design(design, [d.key for d in data.labels], tuple(s.name for s in data.submissions), y=y,
                        rates=rates, inside=inside, y0_docs=[e.ref.doc for e in data.exhaustive] if cluster_docs else None,
                        documents=documents, weights=weights)


@dataclass
class _LinearTerms:
    r"""The core's per-(target, draw) terms (:func:`unpooled.core.estimators.joint._terms`) per unit label.

    Every term is linear in the labels *f*: :math:`C = w f`, :math:`A = \rho\,p_0 f g`,
    :math:`B = \rho\,p_0 f`; ``X`` holds them at *f* = 1, stacked (``(3, m, S)``: ``Cw``, ``Aw``,
    ``Bw``), so any labels' terms are these times *f*, and the estimates of every bootstrap replicate
    of the labels are one matrix product (``(S, R)`` labels give ``(m, R)`` estimates) instead of one
    ``_terms`` call per replicate.  ``S0`` and ``ess`` do not depend on the labels.
    """

    X: np.ndarray
    S0: np.ndarray
    ess: np.ndarray

    @property
    def Cw(self) -> np.ndarray:
        return self.X[0]

    @property
    def Aw(self) -> np.ndarray:
        return self.X[1]

    @property
    def Bw(self) -> np.ndarray:
        return self.X[2]

    def at(self, f: np.ndarray):
        """The core's ``_Terms`` at labels ``f`` (``(S,)``)."""
        from unpooled.core.estimators.joint import _Terms

        fr = np.asarray(f, float)[None, :]
        return _Terms(self.Cw * fr, self.Aw * fr, self.Bw * fr, self.S0, self.ess)

    def point(self, F: np.ndarray):
        r"""Precision, :math:`\hat\nu` and the recall denominator at labels ``F`` (``(S,)`` or ``(S, R)``).

        ``(S, R)``: one product of the stacked terms (one BLAS call instead of three; the same sums up to
        the order in which BLAS adds them).
        """
        F = np.asarray(F, float)
        if F.ndim == 1:
            p, a, Bs = self.Cw @ F, self.Aw @ F, self.Bw @ F
        else:
            m, S = self.X.shape[1:]
            Y = self.X.reshape(3 * m, S) @ F
            p, a, Bs = Y[:m], Y[m:2 * m], Y[2 * m:]
        with np.errstate(divide="ignore", invalid="ignore"):
            nu = np.where(Bs > 0, a / np.where(Bs > 0, Bs, 1.0), 0.0)
        return p, nu, Bs


#: the last :class:`_LinearTerms` computed, with what they were computed from (:func:`_linear_terms`)
_terms_memo: dict = {}
#: terms larger than this are not kept between calls (they are ``3 m S`` floats: 36 MB at 100 systems x 15,000 draws)
TERMS_MEMO_BYTES = 1 << 28


def _same_matrix(a, b) -> bool:
    """Two sparse matrices (or the same one) with equal structure and values."""
    if a is b:
        return True
    return (a.shape == b.shape and a.nnz == b.nnz and np.array_equal(a.indptr, b.indptr)
            and np.array_equal(a.indices, b.indices) and np.array_equal(a.data, b.data))


def _linear_terms(design, W: np.ndarray) -> _LinearTerms:
    r""":class:`_LinearTerms` of ``design`` under weights ``W``: the core's ``_terms`` with every label 1.

    The same operations as the core's (the same numbers), written into one ``(3, m, S)`` buffer
    instead of a dozen temporaries (``C = w \cdot 1`` and ``p_0 \cdot 1`` are ``w`` and ``p_0``);
    ``S0`` is the core's too, except that it is counted without the core's int8 wrap-around (which
    turns 128 or more matching systems into "none").

    **Memoised.**  The terms depend on the labels not at all, only on :math:`p_i(x_s)`, the draws
    (``src``, ``xs``), :math:`p_0` at the draws, ``gs``, ``g0`` and the weights ``W``; the last
    result is kept with copies of those and returned while all of them are equal (compared by value,
    so a stale entry cannot be returned; up to :data:`TERMS_MEMO_BYTES`): a re-adjustment after new
    answers that brought no new labelled draw (control answers, relabelled keys) reuses them.  A
    batch that adds labelled draws (only labelled draws are in the design, so every batch of labels
    for drawn keys does) changes ``n``, hence every weight :math:`w_{ij} = n_j/\sum n` (``balance``)
    and every column of :math:`q_i`: nothing of the old terms carries over exactly, and they are
    recomputed.  ``S0`` depends only on ``W > 0`` and ``g0`` and is kept across such batches.
    """
    d = design
    m, S = d.m, len(d.xs)
    p0x = d.p0[d.xs]
    got = _terms_memo.get("last")
    if got is not None:
        key, lt = got
        if (key[1].shape == d.src.shape and np.array_equal(key[1], d.src) and np.array_equal(key[2], d.xs)
                and np.array_equal(key[3], p0x) and np.array_equal(key[5], d.g0) and np.array_equal(key[6], W)
                and (key[4] is None) == (d.gs is None) and (d.gs is None or np.array_equal(key[4], d.gs))
                and _same_matrix(key[0], d.P)):
            return lt
    n = d.n.astype(float)
    Pm = d.P[:, d.xs].toarray()  # p_i(x_s)
    Q = W @ Pm  # q_i(x_s)
    ratio = W[:, d.src]
    ratio /= np.maximum(n[d.src], 1)[None, :]  # the core's coef
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio /= Q
    ratio[~(Q > 0)] = 0.0  # np.where(Q > 0, coef / Q, 0.0)
    del Q
    X = np.empty((3, m, S))
    np.multiply(ratio, Pm, out=X[0])  # the importance weights: C at f = 1
    np.multiply(ratio, p0x[None, :], out=X[2])  # B at f = 1
    np.multiply(X[2], (Pm > 0) if d.gs is None else d.gs, out=X[1])  # A at f = 1
    del ratio
    wimp = X[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.nan_to_num(wimp.sum(1) ** 2 / (wimp ** 2).sum(1))
    Wpos = W > 0
    s0 = _terms_memo.get("S0")
    if s0 is not None and np.array_equal(s0[0], Wpos) and np.array_equal(s0[1], d.g0):
        S0 = s0[2]
    else:
        # the core's (W > 0) @ g0 > 0, counted in floats: its int8 product wraps at 128 matching systems
        S0 = (Wpos.astype(float) @ d.g0.astype(float)) > 0
        _terms_memo["S0"] = (Wpos, d.g0.copy(), S0)
    lt = _LinearTerms(X, S0, ess)
    _terms_memo.pop("last", None)
    if X.nbytes <= TERMS_MEMO_BYTES:
        _terms_memo["last"] = ((d.P, d.src.copy(), d.xs.copy(), p0x, None if d.gs is None else d.gs.copy(),
                                d.g0.copy(), W.copy()), lt)
    return lt


def _strata_var(U: np.ndarray, src: np.ndarray, m: int) -> np.ndarray:
    """The core's :func:`~unpooled.core.estimators.joint.strata_var`, without its copy of ``U`` when the draws
    are already grouped by stratum (``src`` non-decreasing, as the service's designs are): the same sums of
    the same values in the same order (the core sorts by ``src`` first, which then leaves the order as it is)."""
    from unpooled.core.estimators.joint import strata_var

    src = np.asarray(src)
    if len(src) > 1 and (src[1:] < src[:-1]).any():
        return strata_var(U, src, m)
    U = np.ascontiguousarray(U)
    n_s = np.bincount(src, minlength=m)
    nonempty = n_s > 0
    S1 = np.zeros((U.shape[0], m))
    S2 = np.zeros((U.shape[0], m))
    if U.shape[1]:
        idx = np.searchsorted(src, np.arange(m))[nonempty]
        S1[:, nonempty] = np.add.reduceat(U, idx, axis=1)
        S2[:, nonempty] = np.add.reduceat(U * U, idx, axis=1)
    n = n_s.astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(n > 1, n / np.maximum(n - 1, 1) * (S2 - S1 ** 2 / np.maximum(n, 1)), 0.0)
    return np.maximum(per.sum(axis=1), 0.0)


def score_design(design, keys: list, systems: tuple, *, y: np.ndarray | None = None, rates: ErrorRates | None = None,
                 inside: np.ndarray | None = None, y0_docs: list | None = None, documents: int | None = None,
                 weights: str = "balance") -> Estimates:
    r"""Joint estimates and their variances from a core :class:`~unpooled.core.estimators.joint.Design`.

    ``keys``: the instance key of each draw (design order).  With ``y`` (hard labels) and
    ``rates``, the labels are re-made as :func:`corrected` ``(y, t, f)`` and the spread over the
    rates' replicates is returned as ``var_rates``.  ``inside``: per draw, whether the drawn
    instance is one the exhaustive protocol can find (both arguments in one sentence); the others
    get :math:`p_0 = 0` (module docs).  ``y0_docs``: the document of each exhaustive instance, for
    the variance of :math:`\hat\theta` by documents (None: as independent instances, the core's);
    ``documents``: the number of exhaustively annotated documents (those without a true instance
    count too).  The point estimates are the core's (:func:`unpooled.core.estimators.estimate`
    with weights fixed by the draws, not the labels) on the re-made design.
    """
    from unpooled.core.estimators.exhaustive import restrict_p0, theta_variance
    from unpooled.core.estimators.joint import _f1, _f1_partials, weight_matrix

    t_d = np.ones(len(keys))
    f_d = np.zeros(len(keys))
    labels_for = None
    if rates is not None and y is not None:
        pos = {k: i for i, k in enumerate(rates.keys)}
        idx = np.array([pos.get(k, -1) for k in keys], np.int64)
        has = idx >= 0
        y = np.asarray(y, float)

        def labels_for(t_all, f_all, rows=None):
            """Corrected labels of the draws (``rows`` of them) from per-key rates ``(K,)`` or ``(K, R)``
            (then ``(S, R)``)."""
            t_all, f_all = np.asarray(t_all, float), np.asarray(f_all, float)
            ix, hs, yv = (idx, has, y) if rows is None else (idx[rows], has[rows], y[rows])
            sel = hs if t_all.ndim == 1 else hs[:, None]
            yy = yv if t_all.ndim == 1 else yv[:, None]
            tt = np.where(sel, t_all[np.maximum(ix, 0)], 1.0)
            ff = np.where(sel, f_all[np.maximum(ix, 0)], 0.0)
            return corrected(yy, tt, ff, rates.min_gap)

        t_d = np.where(has, rates.t[np.maximum(idx, 0)], 1.0)
        f_d = np.where(has, rates.f[np.maximum(idx, 0)], 0.0)
        plain = t_d - f_d < rates.min_gap
        t_d, f_d = np.where(plain, 1.0, t_d), np.where(plain, 0.0, f_d)
        design = replace(design, f=labels_for(rates.t, rates.f))
    design = restrict_p0(design, inside)  # p0 = 0 outside the exhaustive protocol's support (the core's)
    m = design.m
    n = design.n
    W = weight_matrix(design.P, n, weights)
    # every term is linear in the labels (the core's C = wimp f, A = ratio p0 f g, B = ratio p0 f): the terms
    # with f = 1 are the per-draw coefficients, and any labels' terms are these times f (:func:`_linear_terms`)
    lt = _linear_terms(design, W)
    t = lt.at(design.f)  # fresh arrays, used up in place below
    p, nu, Bs = lt.point(design.f)
    # importance weight of each draw for each target: the precision terms with every label 1 (never negative)
    wimp = lt.Cw
    sw = wimp.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_bar = np.where(sw > 0, wimp @ t_d / np.where(sw > 0, sw, 1), 1.0)
        f_bar = np.where(sw > 0, wimp @ f_d / np.where(sw > 0, sw, 1), 0.0)
    v = design.v0
    V = v.sum()
    S0 = t.S0.astype(float)
    theta = (S0 * v).sum(1) / V if V > 0 else np.zeros(m)
    r = theta * nu
    f1 = _f1(p, r)
    var_p = _strata_var(t.C, design.src, m)
    # Uu = (A - nu B) / Bs where Bs > 0, else 0: in place in B
    Uu = t.B
    Uu *= nu[:, None]
    np.subtract(t.A, Uu, out=Uu)
    with np.errstate(divide="ignore", invalid="ignore"):
        Uu /= np.where(Bs > 0, Bs, 1)[:, None]
    Uu[~(Bs > 0)] = 0.0
    var_nu = _strata_var(Uu, design.src, m)
    T = v[None, :] * (S0 - theta[:, None]) / V if V > 0 else np.zeros_like(S0)
    # by documents (a cluster sample) when y0_docs is given, else as independent instances: the core's
    var_th = theta_variance(T) if y0_docs is None else theta_variance(T, y0_docs, documents)
    var_r = theta ** 2 * var_nu + nu ** 2 * var_th + var_th * var_nu
    dP, dR = _f1_partials(p, r)
    # F1's influence values dP C + dR theta Uu, in place in C and Uu (both used up)
    Uf = t.C
    Uf *= dP[:, None]
    Uu *= (dR * theta)[:, None]
    Uf += Uu
    var_f = _strata_var(Uf, design.src, m) + (dR * nu) ** 2 * var_th
    extra = {"p": np.zeros(m), "r": np.zeros(m), "f1": np.zeros(m)}
    if labels_for is not None and rates.t_rep is not None and len(rates.t_rep) > 1:
        # every replicate at once: (S, R) labels, (m, R) estimates.  Draws with the same rates and label (one
        # key drawn by several systems) have the same corrected labels: computed once per such group
        order = np.lexsort((y, idx))
        new = np.ones(len(order), bool)
        new[1:] = (idx[order][1:] != idx[order][:-1]) | (y[order][1:] != y[order][:-1])
        group = np.empty(len(order), np.int64)
        group[order] = np.cumsum(new) - 1
        pb, nub, _ = lt.point(labels_for(rates.t_rep.T, rates.f_rep.T, rows=order[new])[group])
        rb = theta[:, None] * nub
        for k, arr in (("p", pb), ("r", rb), ("f1", _f1(pb, rb))):
            extra[k] = np.var(arr, axis=1, ddof=1)
    nfb = np.maximum(n, 1).astype(float)
    n0 = float(max(design.n0, 1))
    fallback = {"p": np.maximum(t.ess, 1), "r": np.full(m, n0), "f1": np.minimum(nfb, n0)}
    return Estimates(tuple(systems), {"p": p, "r": r, "f1": f1},
                     {"p": var_p, "r": var_r, "f1": var_f}, extra, fallback, t_bar, f_bar, t.ess, n)


# --------------------------------------------------------------------------- the service's scoring path
#: where the service takes the error rates from, in order of preference (the first that is available)
PREFERENCE = ("semi", "dawid-skene")
#: bootstrap re-estimates of the rates behind every published interval
REPLICATES = 100
#: the interval of a precision (recall and F1: Wilson at the effective size)
INTERVAL = "raw-wilson"

_memo: dict = {}


def _answers_fp(corpus) -> tuple:
    from django.db.models import Count, Max, Sum

    from unpooled.service.annotation.models import Answer, Kind

    a = Answer.objects.filter(task__corpus=corpus, task__kind=Kind.VERIFY, weight__gt=0).aggregate(
        n=Count("id"), mx=Max("id"), w=Sum("weight"))
    return corpus.pk, corpus.created, a["n"], a["mx"], a["w"]  # (pk, created): a re-created corpus is another


#: a full bootstrap of the rates again once the counted answers have grown by this share since the last one
REBOOTSTRAP_GROWTH = 0.10


@dataclass
class _Bootstrap:
    """The last full bootstrap of a corpus's rates: the answers it saw and its per-worker confusions."""

    answers: VerifyAnswers
    source: str
    point: tuple            # (sens, fpr) of the full fit
    reps: list              # [(sens, fpr), ...] of the replicates
    params: tuple           # (replicates, shrinkage)


def _logit(p):
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return np.log(p) - np.log1p(-p)


def _shifted(boot: _Bootstrap, point: tuple, n_workers: int) -> list:
    r"""The stored replicates moved to a new point fit: per worker, on the logit scale,
    :math:`\operatorname{logit}\hat c^{*}_{b} = \operatorname{logit}\hat c_{new} + (\operatorname{logit}
    \hat c^{*}_{b,old} - \operatorname{logit}\hat c_{old})`; workers new since the bootstrap get no deviation."""
    W0 = boot.answers.n_workers
    out = []
    base = [_logit(np.asarray(c, float)) for c in boot.point]
    new = [_logit(np.asarray(c, float)) for c in point]
    for rep in boot.reps:
        conf = []
        for j in range(2):
            dev = np.zeros(n_workers)
            dev[:W0] = _logit(np.asarray(rep[j], float)) - base[j]
            conf.append(1.0 / (1.0 + np.exp(-(new[j] + dev))))
        out.append(tuple(conf))
    return out


def service_rates(corpus, *, replicates: int = REPLICATES, min_gap: float = MIN_GAP,
                  answers_fp: tuple | None = None) -> ErrorRates | None:
    r"""The corpus's error rates from the first available source of :data:`PREFERENCE`, with
    ``replicates`` bootstrap re-estimates; memoised on the verification answers (count, max id, weights).

    **Between full bootstraps** (new answers arrive with every label batch), the point rates are
    refitted exactly as a full fit would (the same deterministic fit on all answers, so the published
    point estimates do not depend on the history), but the ``replicates`` Dawid–Skene refits are not
    redone: each stored replicate's per-worker confusions are moved by the change of the point fit,
    :math:`\hat c^*_{b,new} = \hat c_{new} + (\hat c^*_{b,old} - \hat c_{old})` on the logit scale
    (:func:`_shifted`; no clipping needed, and to first order the same as on the probability
    scale), workers who joined since then with no deviation, and mapped to per-key rates through
    the current workers of each key.  The replicates' spread stands for the rates' sampling
    uncertainty, which is set by the amount of data behind each worker's confusion (it shrinks as
    :math:`1/n`) and barely moves when the answers grow by a few percent; what does move, the point
    fit, is exact.  (A new worker's uncertainty is missing until the next full bootstrap; its
    confusion is shrunk towards the crowd's by empirical Bayes, which is what it contributes.)
    The full bootstrap is redone (seeded, so it is the same as a cold one) when the counted answers
    have grown by :data:`REBOOTSTRAP_GROWTH` or more since the stored one, when the answers are
    not the stored ones plus new ones (a discounted answer, a re-created corpus), when the source
    changes (the first answered controls), or when none is stored in this process.  Each process
    keeps its own; the fingerprint is read on every call (or taken from the caller that has just read
    it, below), so another process's answers are never missed, but two processes may differ in the
    rates' variance within that approximation.

    ``answers_fp``: the answers' :func:`_answers_fp` as the caller has just read it (the scoring whose
    labels the rates correct), taken instead of reading it again; default: the one given to
    :func:`answers_read` around the call, else it is read.  (A fingerprint that is already stale only
    costs a recomputation at the next call, which reads the new one.)
    """
    if answers_fp is None:
        hint = getattr(_answers_read, "fp", None)
        answers_fp = hint[1] if hint is not None and hint[0] == (corpus.pk, corpus.created) else None
    fp = (tuple(answers_fp) if answers_fp is not None else _answers_fp(corpus), replicates, min_gap)
    got = _memo.get(corpus.pk)
    if got is not None and got[0] == fp:
        return got[1]
    answers = verify_answers(corpus, fp[0])
    boot = got[2] if got is not None and len(got) > 2 else None
    if boot is not None and (boot.params != (replicates, SHRINKAGE) or fp[0][:2] != got[0][0][:2]
                             or not _extends(boot.answers, answers)
                             or len(answers.item) >= (1 + REBOOTSTRAP_GROWTH) * len(boot.answers.item)):
        boot = None
    out = None
    for source in PREFERENCE:
        if boot is not None:
            fitted = _fit_confusions(answers, source, shrinkage=SHRINKAGE, point_only=True)
            if fitted is None:
                continue
            if source != boot.source:
                boot = None
            else:
                out = _rates_of(KeyWorkers.from_answers(answers), fitted[0],
                                _shifted(boot, fitted[0], answers.n_workers) if replicates else None, source,
                                min_gap=min_gap)
                break
        fitted = _fit_confusions(answers, source, replicates=replicates, rng=0, shrinkage=SHRINKAGE)
        if fitted is None:
            continue
        out = _rates_of(KeyWorkers.from_answers(answers), *fitted, source, min_gap=min_gap)
        boot = _Bootstrap(answers, source, fitted[0], fitted[1] or [], (replicates, SHRINKAGE))
        break
    _memo[corpus.pk] = (fp, out, boot if out is not None else None)
    return out


_answers_read = threading.local()


@contextmanager
def answers_read(corpus, fp: tuple):
    """Within the block (in this thread), :func:`service_rates` of ``corpus`` takes ``fp`` as the answers'
    fingerprint instead of reading it: for a caller that has just read it (:func:`_answers_fp`'s count, max
    id and weight sum, with or without the corpus's ``(pk, created)`` in front) and calls it through code
    that does not pass it on (``majority_error_rates``)."""
    fp = tuple(fp)
    if len(fp) == 3:
        fp = (corpus.pk, corpus.created) + fp
    prev = getattr(_answers_read, "fp", None)
    _answers_read.fp = ((corpus.pk, corpus.created), fp)
    try:
        yield
    finally:
        _answers_read.fp = prev


def _draw_keys(systems, by_name, level: str, labels) -> list[str]:
    """The keys of the labelled draws in the design's order (by system, then seq), as the scoring path reads them."""
    from .models import Draw

    by_sub: dict[int, list[str]] = {}
    for sid, key in (Draw.objects.filter(submission__in=[by_name[n] for n in systems], level=level)
                     .order_by("submission_id", "seq").values_list("submission_id", "key")):
        if key in labels:
            by_sub.setdefault(sid, []).append(key)
    return [k for n in systems for k in by_sub.get(by_name[n].pk, ())]


def adjust_result(corpus, res, by_name: dict, *, level: str = "instance", weights: str = "balance",
                  documents: int | None = None, confidence: float = 0.90):
    r"""The published scores: the core's result ``res`` (an :class:`unpooled.core.offline.OfflineResult`
    from labels corrected with :func:`service_rates`' point rates) with

    * recall's :math:`p_0` restricted to instances the exhaustive protocol can find (within one sentence),
    * the variance of :math:`\hat\theta` by documents,
    * the error rates' uncertainty in every interval, and the precision interval on the scale of
      the uncorrected labels (:func:`interval`, ``raw-wilson``).

    Returns ``res`` unchanged (with a warning) when its design does not line up with the database.
    """
    from dataclasses import replace as dc_replace

    def unchanged(why: str):
        return dc_replace(res, warnings=tuple(res.warnings) + (f"interval adjustment skipped: {why}",))

    if weights not in ("balance", "heuristic"):
        return unchanged(f"weights {weights!r} are chosen from the labels")
    design = res.design
    # the labelled draws' keys, their labels and the truth as the incremental scoring read them, when ``res`` is
    # its cached result (no re-reading); else from the database
    got = _scoring_inputs(corpus, res, level, weights)
    if got is not None:
        inputs, keys, labels, truth = got
        fp = ("scoring", inputs)
    else:
        inputs = keys = labels = truth = None
        fp = ("db", _inputs_fp(corpus, level), _digest(res))
    ckey = (corpus.pk, corpus.created, level, weights)
    memo_key = (fp, documents, confidence, _sentences_key(corpus))
    done = _adjusted.get(ckey)
    if done is not None and done[0] == memo_key and (got is None or done[1] is res):
        return done[2]  # nothing new since the last adjustment: the same scores
    if got is None:
        from unpooled.service.annotation.actions import current_labels

        from .actions import exhaustive_truth

        lab = current_labels(corpus, method="majority")
        keys = _draw_keys(res.systems, by_name, level, lab)
        labels = {k: lab[k].correct for k in keys}
        truth, _ = exhaustive_truth(corpus)
    if len(keys) != len(design.xs) or len(truth) != design.n0:
        return unchanged("the draws or the exhaustive truth changed while scoring")
    # the rates of the answers the scoring read (its fingerprint, when ``res`` is its cached result: not read again)
    rates = service_rates(corpus, answers_fp=None if got is None or inputs[5] is None
                          else (corpus.pk, corpus.created) + tuple(inputs[5]))
    y = np.array([float(labels[k]) for k in keys])
    inside = _inside(corpus, keys)
    est = score_design(design, keys, res.systems, y=y if rates is not None else None, rates=rates, inside=inside,
                       y0_docs=[t.ref.doc for t in truth], documents=documents, weights=weights)
    rows = []
    for i, row in enumerate(res.rows):
        row_est = est.row(i, INTERVAL, rates=True, confidence=confidence)
        rows.append(dc_replace(row, **{k: row_est[k] for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1",
                                                              "f1_lo", "f1_hi")}))
    out = dc_replace(res, rows=tuple(rows))
    _adjusted[ckey] = (memo_key, res, out)
    return out


#: (corpus pk, created, level, weights) -> (fingerprints, the result adjusted, the adjusted result)
_adjusted: dict = {}


def _scoring_inputs(corpus, res, level: str, weights: str):
    """``(inputs, keys, labels, truth)`` of :mod:`.scoring`'s cached result when ``res`` is it and its labels
    and truth are still the ones it was computed from (``inputs``: its fingerprints of submissions, draws,
    truth, labels and answers; ``labels``: key -> majority label); else None."""
    from . import scoring

    ckey = scoring._ckey(corpus)
    with scoring._lock:
        for rkey, done in scoring._results.items():
            if done[1] is res:
                break
        else:
            return None
        if rkey[0] != ckey or rkey[1] != level or rkey[3] != weights or rkey[4] != "majority" or done[2] is None:
            return None
        inputs, _, keys = done
        lab = scoring._labels.get((ckey, "majority"))
        pool = scoring._pools.get((ckey, rkey[2]))
        if lab is None or lab.fp != inputs[4] or pool is None or pool.truth is None or pool.truth.fp != inputs[3]:
            return None
        values = lab.values
        if any(k not in values for k in keys):
            return None
        return inputs, keys, {k: values[k][0] for k in keys}, list(pool.truth.truth)


def _inputs_fp(corpus, level: str) -> tuple:
    """Fingerprints of what :func:`adjust_result` reads: answers, draws, labels, the exhaustive truth."""
    from django.db.models import Count, Max

    from unpooled.service.annotation.models import Label

    from .models import Draw
    from .scoring import _truth_inputs

    draws = Draw.objects.filter(submission__corpus=corpus, level=level).aggregate(n=Count("id"), mx=Max("id"))
    labels = Label.objects.filter(corpus=corpus, method="majority").aggregate(n=Count("id"), mx=Max("id"))
    return (_answers_fp(corpus), (draws["n"], draws["mx"]), (labels["n"], labels["mx"]), _truth_inputs(corpus))


def _digest(res) -> tuple:
    return tuple((r.system, r.p, r.r, r.f1, r.p_lo, r.p_hi, r.r_lo, r.r_hi, r.f1_lo, r.f1_hi, r.labels)
                 for r in res.rows) + (len(res.design.xs), res.design.n0)


def _inside(corpus, keys) -> np.ndarray:
    """Per key, :func:`within_sentence` (memoised per key under the corpus's sentence split)."""
    from unpooled.core.matching import InstanceRef

    skey = _sentences_key(corpus)
    memo = _inside_memo.get(skey)
    if memo is None:
        _inside_memo.clear()
        memo = _inside_memo[skey] = {}
    sentences = None
    out = np.empty(len(keys), bool)
    for j, k in enumerate(keys):
        v = memo.get(k)
        if v is None:
            if sentences is None:
                sentences = _sentences(corpus)
            v = memo[k] = within_sentence(InstanceRef.from_key(k), sentences)
        out[j] = v
    return out


_inside_memo: dict = {}


_sentence_memo: dict = {}


def clear_cache() -> None:
    """Forget the memoised error rates (tests; coverage trials, whose rolled-back rows reappear under the same ids)."""
    _memo.clear()
    _sentence_memo.clear()
    _adjusted.clear()
    _inside_memo.clear()
    _answer_rows.clear()
    _terms_memo.clear()


def _sentences_key(corpus) -> tuple:
    return corpus.pk, corpus.created, corpus.n_documents, corpus.n_sentences


def _sentences(corpus):
    key = _sentences_key(corpus)
    got = _sentence_memo.get(key)
    if got is None:
        got = _sentence_memo[key] = sentence_index(corpus)
    return got


__all__ = ["INTERVAL", "INTERVALS", "PREFERENCE", "REPLICATES", "SOURCES", "ErrorRates", "Estimates", "KeyWorkers",
           "VerifyAnswers", "adjust_result", "between_worker_variance", "control_confusions", "corrected",
           "clear_cache", "ds_confusions", "error_rates", "interval", "majority_yes", "score_data", "score_design", "sentence_index",
           "service_rates", "verify_answers", "within_sentence"]
