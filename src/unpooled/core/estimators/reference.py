r"""Recall and F1 of the *human reference*: the exhaustive annotation scored as a submission of its own.

The exhaustive annotation :math:`H` of the sampled documents is what every system's recall is measured against,
so its own recall cannot come from it (it would be 1 by construction).  It comes from an independent sample of
the true facts of the same documents: the systems' predictions there, verified by annotators who did not make
:math:`H` (a capture--recapture design; Lincoln 1930, Petersen 1896).  Let :math:`S` be the distinct system
instances in the exhaustively annotated documents (within one sentence: the support of :math:`p_0`), split into
those :math:`H` finds, :math:`S_1` (:math:`n_1` of them), and the rest, :math:`S_0` (:math:`n_0`).  With
:math:`\pi_1, \pi_0` the shares of correct instances in each (each estimated like a system's precision, from
verification votes, :mod:`.noisy`),

.. math::

    r_H = \frac{\sum_{x \in S} f(x)\,g_H(x)}{\sum_{x \in S} f(x)} = \frac{n_1\pi_1}{n_1\pi_1 + n_0\pi_0},
    \qquad
    \widehat{\mathrm{Var}}(\hat r_H) = \Bigl(\frac{n_1 n_0 \hat\pi_0}{D^2}\Bigr)^2 \widehat{\mathrm{Var}}(\hat\pi_1)
      + \Bigl(\frac{n_0 n_1 \hat\pi_1}{D^2}\Bigr)^2 \widehat{\mathrm{Var}}(\hat\pi_0),
    \quad D = n_1\hat\pi_1 + n_0\hat\pi_0

(the delta method; the two shares come from different items and votes).  A share estimated at a bound (all
items of a group judged correct, or none) comes with a standard error of 0 from the vote model, which would make
the interval a point; each share's standard error is therefore at least that of a binomial share at the
plus-two estimate :math:`\tilde\pi_g = (n_g\hat\pi_g + 1)/(n_g + 2)`,
:math:`\sqrt{\tilde\pi_g(1-\tilde\pi_g)/(n_g+2)}` (Agresti and Coull 1998), with :math:`n_g` the group's
labelled instances.  :math:`r_H` is the recall of
:math:`H` over the true facts the systems find; it equals :math:`H`'s recall over all true facts when whether
:math:`H` finds a fact does not depend on whether a system finds it (the capture--recapture assumption).  Facts
hard for both (found by neither) make it an overestimate.

F1 is :math:`2 p r / (p + r)` of the point estimates (method.md §1.2), its variance by the delta method with
precision and recall independent (precision's votes are on :math:`H`'s own instances, recall's on the systems').
Recall's interval is Wilson's at the effective sample size (:func:`.intervals.wilson`); F1's is derived from precision's
and recall's (:func:`.intervals.f1_interval`, correlation 0).

References
----------
F. C. Lincoln. Calculating waterfowl abundance on the basis of banding returns. USDA Circular 118, 1930.
A. Agresti, B. A. Coull. Approximate is better than "exact" for interval estimation of binomial proportions.
*The American Statistician* 52(2):119-126, 1998.
A. T. Chaganty, A. Paranjape, P. Liang, C. D. Manning. Importance sampling for unbiased on-demand evaluation of
knowledge base population. EMNLP 2017 (§2, the harmonic mean of the point estimates).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..errors import InvalidInputError
from .intervals import _f1_partials, f1_interval, f1_score, wilson
from .results import ConfidenceInterval, Estimate


#: the methods of the reference's estimates (module docs)
RECALL_METHOD, F1_METHOD = "capture", "independent"


def _undefined(method: str, confidence: float) -> Estimate:
    return Estimate.undefined("no instance of the sample is estimated correct", method, confidence)


def _num(name: str, v, *, lo: float = 0.0, hi: float = math.inf, nan: bool = False) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name}: expected a number, got {v!r}") from None
    if math.isnan(x) and nan:
        return x
    if not (lo <= x <= hi):
        raise InvalidInputError(f"{name}: expected a number in [{lo:g}, {hi:g}], got {v!r}")
    return x


def _recall_by_capture_iv(n_found, p_found, se_found, n_missed, p_missed, se_missed, confidence):
    out = (_num("n_found", n_found), _num("p_found", p_found, hi=1.0, nan=True), _num("se_found", se_found, nan=True),
           _num("n_missed", n_missed), _num("p_missed", p_missed, hi=1.0, nan=True),
           _num("se_missed", se_missed, nan=True))
    c = _num("confidence", confidence, hi=1.0)
    if not 0 < c < 1:
        raise InvalidInputError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    return out + (c,)


def recall_by_capture(n_found, p_found, se_found, n_missed, p_missed, se_missed, *,
                      confidence: float = 0.90, labelled_found=None, labelled_missed=None) -> Estimate:
    r"""Recall of the reference over a verified sample of true facts (module docs).

    Parameters
    ----------
    n_found, n_missed : float
        How many sampled instances the reference finds, and misses (weighted counts allowed).
    p_found, p_missed : float
        The estimated shares of correct instances among each (NaN when a group is empty).
    se_found, se_missed : float
        Their standard errors.
    confidence : float
        Interval level in (0, 1).
    labelled_found, labelled_missed : float, optional
        How many of each group have labels (default ``n_found``, ``n_missed``): the floor of each share's standard
        error (module docs).

    Returns
    -------
    :class:`~.results.Estimate`
        NaN when no instance of the sample is estimated correct.

    Examples
    --------
    >>> e = recall_by_capture(80, 0.9, 0.03, 20, 0.5, 0.1)
    >>> round(e.value, 4), e.lo < e.value < e.hi
    (0.878, True)
    """
    n1, p1, s1, n0, p0, s0, confidence = _recall_by_capture_iv(n_found, p_found, se_found, n_missed, p_missed,
                                                               se_missed, confidence)
    if n1 == 0:
        p1, s1 = 0.0, 0.0
    if n0 == 0:
        p0, s0 = 0.0, 0.0
    if any(math.isnan(v) for v in (p1, p0)):
        return _undefined(RECALL_METHOD, confidence)
    m1 = n1 if labelled_found is None else _num("labelled_found", labelled_found)
    m0 = n0 if labelled_missed is None else _num("labelled_missed", labelled_missed)

    def floor(se, p, m):  # eq. in the module docs: the plus-two binomial standard error
        t = (m * p + 1) / (m + 2)
        return max(0.0 if math.isnan(se) else se, math.sqrt(t * (1 - t) / (m + 2)))

    s1 = floor(s1, p1, m1) if n1 > 0 else 0.0
    s0 = floor(s0, p0, m0) if n0 > 0 else 0.0
    a, b = n1 * p1, n0 * p0
    D = a + b
    if D <= 0:
        return _undefined(RECALL_METHOD, confidence)
    r = a / D
    var = (n1 * b / D ** 2) ** 2 * s1 ** 2 + (n0 * a / D ** 2) ** 2 * s0 ** 2
    lo, hi = wilson(np.array([r]), np.array([var]), confidence, np.array([max(n1 + n0, 1.0)]))
    return Estimate(r, math.sqrt(var), ConfidenceInterval(float(lo[0]), float(hi[0]), confidence, "wilson"), n1 + n0,
                    RECALL_METHOD)


def f1_independent(p: Estimate, r: Estimate) -> Estimate:
    r"""F1 of independent precision and recall estimates: :math:`2pr/(p+r)`, its delta-method standard error, and
    the interval derived from theirs (:func:`.intervals.f1_interval` with correlation 0): it reaches 0 when either of
    theirs does, 1 only when both do, and never lies outside what their intervals allow (a Wilson interval around F1
    at its own effective size did: 0.980 [0.176, 1.000] beside P [0.807, 1.000] and R [0.887, 0.987]).  Its level
    is theirs."""
    level = r.interval.level if math.isnan(p.interval.level) else p.interval.level
    if any(math.isnan(v) for v in (p.value, r.value)):
        return Estimate.undefined(p.reason or r.reason, F1_METHOD, level)
    pv, rv = np.array([p.value]), np.array([r.value])
    f1 = float(f1_score(pv, rv)[0])
    dP, dR = _f1_partials(pv, rv)
    var_p, var_r = ((0.0 if math.isnan(e.se) else e.se) ** 2 for e in (p, r))
    var = float(dP[0] ** 2 * var_p + dR[0] ** 2 * var_r)
    lo, hi = f1_interval(pv, rv, ([p.lo], [p.hi]), ([r.lo], [r.hi]), var_p, var_r, var)
    return Estimate(f1, math.sqrt(var), ConfidenceInterval(float(lo[0]), float(hi[0]), level, "f1-region"),
                    min(p.n, r.n), F1_METHOD)


def found_by_reference(facts: Iterable[tuple], candidates: Iterable[tuple]) -> np.ndarray:
    """Whether the reference finds each candidate instance: it holds the same predicate between an entity with a
    mention overlapping the candidate's subject and one with a mention overlapping its object, in the same
    sentence of the same document.

    ``facts``: the reference's ``(doc, sentence, predicate, subject entity, object entity)``; ``candidates``:
    ``(doc, sentence, predicate, subject entities, object entities)`` with the reference's entities whose
    mentions overlap each argument (sets).  Returns a boolean array, one per candidate.
    """
    have: dict[tuple, set] = {}
    for doc, sent, pred, s, o in facts:
        have.setdefault((doc, sent, pred), set()).add((s, o))
    out = []
    for doc, sent, pred, subj, obj in candidates:
        pairs = have.get((doc, sent, pred), ())
        out.append(any((s, o) in pairs for s in subj for o in obj) if pairs else False)
    return np.array(out, dtype=bool)


__all__ = ["f1_independent", "found_by_reference", "recall_by_capture"]
