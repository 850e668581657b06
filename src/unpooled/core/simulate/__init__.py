"""Simulations: a synthetic TAC-like world, pooling bias, estimators and adaptive labelling."""

from .pooling import PoolingBiasResult, pool_truth, pooled_scores, pooling_bias, reference_bias
from .world import World, f1_score, load_spread, make_world, parametric_spread, team_of_run

__all__ = [
    "PoolingBiasResult", "World", "f1_score", "load_spread", "make_world", "parametric_spread", "pool_truth",
    "pooled_scores", "pooling_bias", "reference_bias", "team_of_run",
]
