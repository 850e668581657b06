"""Crowd answers: formats, aggregation (majority vote, Dawid–Skene), agreement, simulated annotators."""

from .aggregation import (
    Answers, DawidSkeneResult, GoldAccuracy, MajorityResult, dawid_skene, majority_vote, worker_accuracy_on_gold,
    workers_to_block,
)
from .agreement import agreement_by_group, fleiss_kappa, krippendorff_alpha
from .crowd import SimulatedAnnotator, expected_majority_accuracy, simulate_answers

__all__ = [
    "Answers", "DawidSkeneResult", "GoldAccuracy", "MajorityResult", "SimulatedAnnotator", "agreement_by_group",
    "dawid_skene", "expected_majority_accuracy", "fleiss_kappa", "krippendorff_alpha", "majority_vote",
    "simulate_answers", "worker_accuracy_on_gold", "workers_to_block",
]
