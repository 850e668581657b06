"""Estimators of precision, recall and F1 from sampled, labelled instances (pure numpy/scipy)."""

from .joint import ESTIMATORS, WEIGHTS, Design, Scores, WeightDegeneracyWarning, estimate, make_design, weight_matrix
from .sampling import LEVELS, distribution_matrix, draw, p0_weights, sampling_distribution

__all__ = [
    "ESTIMATORS", "LEVELS", "WEIGHTS", "Design", "Scores", "WeightDegeneracyWarning", "distribution_matrix", "draw",
    "estimate", "make_design", "p0_weights", "sampling_distribution", "weight_matrix",
]
