r"""Covariances of every system's precision, recall and F1 under the joint design: "is A better than B?".

Systems evaluated jointly share draws, labels and the exhaustive sample, so their estimates are correlated; two
systems that share most of their output err together, and the variance of their difference is far smaller than
the sum of their variances.  The estimates' linear parts (:class:`.linear.Linear`, from
:func:`.joint.linear_parts`) give it exactly: the variance of :math:`\hat F_i - \hat F_j` is the design variance
of the difference of the two systems' rows (per-draw influence values within strata of draws, over distinct
instances, :func:`.finite.strata_var`; per-document linearised values of the exhaustive sample,
:func:`.joint._var0`).  Both variances are sums of squares of centred values, so the covariance of two systems is
the same sum with cross products of their rows (:meth:`.linear.Linear.cov`, ``cross=True`` in
:func:`.finite.strata_var` and :func:`.exhaustive.theta_variance`): the matrix whose diagonal is every system's
variance, and

.. math::

    \widehat{\mathrm{Var}}(\hat F_i - \hat F_j) = \hat\Sigma_{ii} + \hat\Sigma_{jj} - 2\hat\Sigma_{ij}

is exactly the variance of the difference of the two rows (tests/core/test_paired.py checks it against the
variance functions applied to the difference, and both against a Monte Carlo over resampled designs).
The diagonal holds the published variances (:func:`covariances`).  :mod:`unpooled.core.ranking` turns the
covariance matrix into simultaneous pairwise intervals, rank intervals and tie groups.

**With crowd votes** (:mod:`.from_votes`) the variance has three parts.  *Design*: the same construction on the
votes' influence rows (:func:`.from_votes._design_linear`).  *Confusions*: the estimates refitted under each
replicate of the workers' confusions; their covariance over the replicates (exact as the marginal part is).
*Votes*: the votes' variance is computed per system (:func:`.from_votes._votes_var`) and its covariance between
systems is not: it is taken as 0, i.e. the votes' part of a difference's variance is the sum of the two systems'
(an upper bound whenever the votes move the two estimates the same way, as they do for the items two systems
share: the difference's interval is then conservative, never narrow; measured 1.0-1.6 times the Monte Carlo
variance of the difference in tests/core/test_paired.py).

**Work.** Two sparse products per term (the draws' cross products within cells and units), so about the
estimate's own cost plus an ``(m, m)`` matrix per metric; the fit's own linear parts when the estimate kept them
(``estimate(..., linear=True)``, as the service scores), else a second fit (:func:`.from_votes.vote_covariances`).  Up to :data:`MAX_SYSTEMS` systems.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidInputError

METRICS = ("p", "r", "f1")
#: covariance matrices up to this many systems (a dense m x m matrix per metric; beyond, none: the service then
#: compares the systems as independent)
MAX_SYSTEMS = 3000


@dataclass(frozen=True)
class Covariances:
    """Per metric (``p``, ``r``, ``f1``) the covariance matrix (``cov``, ``(m, m)``; its diagonal the published
    variances) of the estimates of one :class:`~.joint.Scores` (which holds the estimates); ``notes``: what is
    approximated.  Not an estimate itself: the joint variance of that result's, for :mod:`unpooled.core.ranking`."""

    cov: dict
    notes: tuple[str, ...] = ()


def covariances(d, scores, *, votes=None) -> Covariances:
    """The covariance matrices of ``scores`` (:func:`.joint.estimate` of ``d``, with the same ``votes``): the
    published variances on the diagonal, the covariances of the linear parts off it (module docs).

    Raises
    ------
    InvalidInputError
        ``scores`` without weights (not from :func:`.joint.estimate`), more than :data:`MAX_SYSTEMS` systems.
    """
    from .joint import _terms, linear_parts

    if scores.weights is None:
        raise InvalidInputError("scores: expected the result of estimate() (its weights are needed)")
    if d.m > MAX_SYSTEMS:
        raise InvalidInputError(f"scores: covariances of at most {MAX_SYSTEMS} systems, got {d.m}")
    simple = scores.method == "simple"
    notes: tuple[str, ...] = ()
    kept = scores.linear  # the fit's own parts (estimate(..., linear=True)): no second fit
    if votes is None:
        lin = kept["linear"] if kept else linear_parts(d, _terms(d, scores.weights), scores.confidence,
                                                       simple=simple)[1]
        cov = {k: lin[k].cov(d, scores.confidence) for k in METRICS}
    elif kept:
        from .from_votes import fitted_covariances

        cov, notes = fitted_covariances(d, kept["linear"], kept["reps"], kept["var_votes"], scores.confidence)
    else:
        from .from_votes import vote_covariances

        cov, notes = vote_covariances(d, scores.weights, votes, scores.confidence, simple)
    for k in METRICS:
        cov[k][np.diag_indices(d.m)] = getattr(scores, k).se ** 2
    return Covariances(cov, notes)
