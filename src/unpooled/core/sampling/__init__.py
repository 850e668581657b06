"""Document sampling for exhaustive annotation, with inclusion probabilities (Horvitz–Thompson)."""

from .documents import (
    DocumentSample, horvitz_thompson_total, poisson_probabilities, query_scores, recall_estimate, sample_second_stage,
    sample_tfidf, sample_two_stage, sample_uniform, tokenize,
)

__all__ = [
    "DocumentSample", "horvitz_thompson_total", "poisson_probabilities", "query_scores", "recall_estimate",
    "sample_second_stage", "sample_tfidf", "sample_two_stage", "sample_uniform", "tokenize",
]
