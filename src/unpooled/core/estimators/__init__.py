"""Estimators of precision, recall and F1 from sampled, labelled instances (pure numpy/scipy)."""

from .breakdown import SubsetScores, UndefinedEstimateWarning, subset_scores, subset_scores_many
from .joint import ESTIMATORS, WEIGHTS, Design, Scores, WeightDegeneracyWarning, estimate, make_design, weight_matrix
from .sampling import LEVELS, distribution_matrix, draw, p0_weights, sampling_distribution

__all__ = [
    "ESTIMATORS", "LEVELS", "WEIGHTS", "Design", "Scores", "SubsetScores", "UndefinedEstimateWarning",
    "WeightDegeneracyWarning", "distribution_matrix", "draw", "estimate", "make_design", "p0_weights",
    "sampling_distribution", "subset_scores", "subset_scores_many", "weight_matrix",
]
