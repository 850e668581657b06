r"""Aggregating crowd answers: majority vote and Dawid–Skene.

Answers are parallel integer arrays ``items``, ``workers``, ``labels`` (class indices) and
optional ``weights`` (0 discounts an answer: a blocked annotator's).  :class:`Answers`
encodes arbitrary hashable keys into that form.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterable

import numpy as np

from ..errors import InvalidInputError


@dataclass(frozen=True)
class Answers:
    """Crowd answers in long form: answer *a* is worker ``workers[a]``'s ``labels[a]`` for ``items[a]``."""

    items: np.ndarray
    workers: np.ndarray
    labels: np.ndarray
    weights: np.ndarray
    item_keys: tuple = ()
    worker_keys: tuple = ()
    classes: tuple = ()

    @property
    def n_items(self) -> int:
        return len(self.item_keys) if self.item_keys else (int(self.items.max()) + 1 if len(self.items) else 0)

    @property
    def n_workers(self) -> int:
        return len(self.worker_keys) if self.worker_keys else (int(self.workers.max()) + 1 if len(self.workers) else 0)

    @property
    def n_classes(self) -> int:
        return len(self.classes) if self.classes else (int(self.labels.max()) + 1 if len(self.labels) else 0)

    @classmethod
    def from_arrays(cls, items, workers, labels, weights=None, *, n_items=None, n_workers=None, n_classes=None) -> "Answers":
        items = np.asarray(items, dtype=np.int64)
        workers = np.asarray(workers, dtype=np.int64)
        labels = np.asarray(labels, dtype=np.int64)
        if not (items.shape == workers.shape == labels.shape) or items.ndim != 1:
            raise InvalidInputError("items, workers, labels: expected 1-d arrays of one length")
        w = np.ones(len(items)) if weights is None else np.asarray(weights, dtype=float)
        if w.shape != items.shape or np.any(w < 0) or not np.all(np.isfinite(w)):
            raise InvalidInputError("weights: expected one finite non-negative weight per answer")
        for name, arr in (("items", items), ("workers", workers), ("labels", labels)):
            if len(arr) and arr.min() < 0:
                raise InvalidInputError(f"{name}: indices must be non-negative, got {int(arr.min())}")
        ni = n_items if n_items is not None else (int(items.max()) + 1 if len(items) else 0)
        nw = n_workers if n_workers is not None else (int(workers.max()) + 1 if len(workers) else 0)
        nc = n_classes if n_classes is not None else (int(labels.max()) + 1 if len(labels) else 0)
        if len(labels) and labels.max() >= nc:
            raise InvalidInputError(f"labels: class index {int(labels.max())} is not below n_classes={nc}")
        return cls(items, workers, labels, w, tuple(range(ni)), tuple(range(nw)), tuple(range(nc)))

    @classmethod
    def from_records(cls, records: Iterable[tuple[Hashable, Hashable, Hashable]], *, classes=None,
                     weights=None) -> "Answers":
        """Encode ``(item, worker, label)`` records; keys keep their first-seen order.

        ``classes`` (optional) fixes the class order (e.g. ``(0, 1)``); else sorted labels seen.
        """
        recs = list(records)
        item_index: dict = {}
        worker_index: dict = {}
        for it, wk, _ in recs:
            item_index.setdefault(it, len(item_index))
            worker_index.setdefault(wk, len(worker_index))
        if classes is None:
            classes = tuple(sorted({lab for _, _, lab in recs}))
        class_index = {c: i for i, c in enumerate(classes)}
        try:
            labels = [class_index[lab] for _, _, lab in recs]
        except KeyError as exc:
            raise InvalidInputError(f"labels: {exc.args[0]!r} is not one of the classes {tuple(classes)}") from None
        w = np.ones(len(recs)) if weights is None else np.asarray(weights, dtype=float)
        return cls(np.array([item_index[r[0]] for r in recs], dtype=np.int64),
                   np.array([worker_index[r[1]] for r in recs], dtype=np.int64),
                   np.array(labels, dtype=np.int64), w, tuple(item_index), tuple(worker_index), tuple(classes))


def _counts(ans: Answers, n_classes: int) -> np.ndarray:
    """Weighted vote counts, shape (n_items, n_classes)."""
    out = np.zeros((ans.n_items, n_classes))
    np.add.at(out, (ans.items, ans.labels), ans.weights)
    return out


def strict_majority(yes, n):
    """Binary verification's rule: correct where a strict majority of the ``n`` answers say yes (a tie is not
    correct).  Scalars or arrays; the service labels items by it and the estimator's labelled-sample figures
    use it.

    >>> bool(strict_majority(2, 3)), bool(strict_majority(1, 2))
    (True, False)
    """
    return 2 * np.asarray(yes) > np.asarray(n)


@dataclass(frozen=True)
class MajorityResult:
    labels: np.ndarray       # winning class per item; -1 without answers (or a tie with tie='none')
    shares: np.ndarray       # vote share per class (soft labels), rows sum to 1 (0 without answers)
    n_answers: np.ndarray


def majority_vote(answers: Answers, *, n_classes: int | None = None, tie: str = "random", rng=None) -> MajorityResult:
    """The paper's rule: each item takes the class most of its (weighted) answers gave.

    ``tie``: ``'random'`` breaks ties uniformly at random, ``'first'`` takes the lowest
    class index, ``'none'`` gives -1.
    """
    if tie not in ("random", "first", "none"):
        raise InvalidInputError(f"tie: expected 'random', 'first' or 'none', got {tie!r}")
    k = n_classes or answers.n_classes
    counts = _counts(answers, k)
    total = counts.sum(axis=1)
    shares = np.divide(counts, total[:, None], out=np.zeros_like(counts), where=total[:, None] > 0)
    best = counts.max(axis=1)
    winners = counts == best[:, None]
    n_win = winners.sum(axis=1)
    labels = counts.argmax(axis=1)
    if tie == "random":
        rng = np.random.default_rng(rng)
        for i in np.flatnonzero((n_win > 1) & (total > 0)):
            labels[i] = rng.choice(np.flatnonzero(winners[i]))
    elif tie == "none":
        labels[n_win > 1] = -1
    labels[total == 0] = -1
    n = np.bincount(answers.items, weights=(answers.weights > 0).astype(float), minlength=answers.n_items)
    return MajorityResult(labels, shares, n.astype(int))


@dataclass(frozen=True)
class DawidSkeneResult:
    probas: np.ndarray           # (n_items, n_classes) posterior of the true class
    labels: np.ndarray           # argmax
    priors: np.ndarray           # (n_classes,)
    confusion: np.ndarray        # (n_workers, n_classes, n_classes): [w, true, given]
    worker_accuracy: np.ndarray  # (n_workers,): sum_c prior_c * confusion[w, c, c]
    log_likelihood: tuple
    n_iter: int


def dawid_skene(answers: Answers, *, n_classes: int | None = None, max_iter: int = 100, tol: float = 1e-6,
                smoothing: float = 0.01, shrinkage: float = 5.0) -> DawidSkeneResult:
    r"""Dawid–Skene: latent true classes with one confusion matrix per worker, fitted by EM.

    Model: item *i* has true class :math:`z_i \sim \text{Cat}(\rho)`; worker *w* answers
    class *l* with probability :math:`\pi^{(w)}_{z_i l}`, independently.  E step (log space):

    .. math:: T_{ic} \propto \rho_c \prod_{a: i_a = i} \left(\pi^{(w_a)}_{c\,l_a}\right)^{\omega_a}

    M step: :math:`\rho_c \propto \sum_i T_{ic}`,
    :math:`\pi^{(w)}_{cl} \propto s + \tau \bar\pi_{cl} + \sum_{a: w_a = w, l_a = l} \omega_a T_{i_a c}`
    where :math:`\bar\pi` is the pooled confusion matrix of all workers: each worker's matrix is
    shrunk towards the crowd's by ``shrinkage`` :math:`\tau` answers' worth (a Dirichlet prior),
    so a worker with few answers is not over-trusted, while a worker with many answers is judged
    on their own.  Measured over 30 simulated crowds of 700 items, k = 3, against the majority
    vote: six workers of accuracy 0.8: −0.15 points with :math:`\tau = 0`, −0.10 with
    :math:`\tau = 5`; two of 0.95 and four of 0.55: +10.0 and +10.2 points.  ``smoothing`` *s* keeps entries away from 0.  Initialised
    from the weighted majority vote shares.  Items without answers keep the prior.

    References: A. P. Dawid and A. M. Skene, "Maximum likelihood estimation of observer
    error-rates using the EM algorithm", *Applied Statistics* 28(1):20–28, 1979,
    doi:10.2307/2346806.
    """
    if max_iter < 1:
        raise InvalidInputError(f"max_iter: expected at least 1, got {max_iter}")
    if smoothing < 0:
        raise InvalidInputError(f"smoothing: expected >= 0, got {smoothing}")
    if shrinkage < 0:
        raise InvalidInputError(f"shrinkage: expected >= 0, got {shrinkage}")
    k = n_classes or answers.n_classes
    n_i, n_w = answers.n_items, answers.n_workers
    it, wk, lb, om = answers.items, answers.workers, answers.labels, answers.weights
    counts = _counts(answers, k)
    total = counts.sum(axis=1, keepdims=True)
    T = np.where(total > 0, counts / np.where(total > 0, total, 1), 1.0 / k)
    has = total[:, 0] > 0
    history: list[float] = []
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        # M step
        priors = T[has].sum(axis=0) + 1e-12 if has.any() else np.full(k, 1.0)
        priors = priors / priors.sum()
        counts_w = np.zeros((n_w, k, k))
        # counts_w[w, c, l] += om * T[i, c]
        np.add.at(counts_w, (wk, slice(None), lb), (om[:, None] * T[it]))
        pooled = counts_w.sum(axis=0) + smoothing
        pooled /= pooled.sum(axis=1, keepdims=True)
        conf = counts_w + smoothing + shrinkage * pooled[None]
        conf /= conf.sum(axis=2, keepdims=True)
        # E step
        logc = np.log(conf)
        ll = np.zeros((n_i, k)) + np.log(priors)
        np.add.at(ll, it, om[:, None] * logc[wk, :, lb])
        mx = ll.max(axis=1, keepdims=True)
        norm = mx[:, 0] + np.log(np.exp(ll - mx).sum(axis=1))
        T = np.exp(ll - norm[:, None])
        history.append(float(norm[has].sum()))
        if len(history) > 1 and abs(history[-1] - history[-2]) <= tol * max(1.0, abs(history[-2])):
            break
    acc = np.einsum("c,wcc->w", priors, conf)
    return DawidSkeneResult(T, T.argmax(axis=1), priors, conf, acc, tuple(history), n_iter)


@dataclass(frozen=True)
class GoldAccuracy:
    answered: np.ndarray   # control answers per worker
    correct: np.ndarray    # right ones
    accuracy: np.ndarray   # posterior mean under Beta(prior)

    def to_dict(self) -> dict:
        return {"answered": self.answered.tolist(), "correct": self.correct.tolist(), "accuracy": self.accuracy.tolist()}


def worker_accuracy_on_gold(answers: Answers, gold, *, prior=(1.0, 1.0)) -> GoldAccuracy:
    """Each worker's accuracy on control items whose true class is known (``gold[i] >= 0``).

    The estimate is the Beta posterior mean :math:`(c + a) / (n + a + b)` with prior (a, b).
    """
    gold = np.asarray(gold, dtype=np.int64)
    if gold.shape != (answers.n_items,):
        raise InvalidInputError(f"gold: expected one class (or -1) per item, {answers.n_items} items")
    a, b = prior
    known = (gold[answers.items] >= 0) & (answers.weights > 0)
    right = known & (gold[answers.items] == answers.labels)
    n = np.bincount(answers.workers[known], minlength=answers.n_workers)
    c = np.bincount(answers.workers[right], minlength=answers.n_workers)
    return GoldAccuracy(n, c, (c + a) / (n + a + b))


def workers_to_block(acc: GoldAccuracy, *, threshold: float, min_answers: int) -> np.ndarray:
    """Workers with at least ``min_answers`` control answers and posterior accuracy below ``threshold``."""
    return (acc.answered >= min_answers) & (acc.accuracy < threshold)
