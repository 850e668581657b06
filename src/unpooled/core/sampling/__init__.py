"""Document sampling for exhaustive annotation, with inclusion probabilities (Horvitz–Thompson)."""

from .documents import (
    FEW_DOCUMENTS, DocumentSample, horvitz_thompson_total, poisson_probabilities, query_scores, recall_estimate,
    sample_second_stage, sample_tfidf, sample_two_stage, sample_uniform, small_sample_warning, tokenize,
)

__all__ = [
    "FEW_DOCUMENTS", "DocumentSample", "horvitz_thompson_total", "poisson_probabilities", "query_scores",
    "recall_estimate", "sample_second_stage", "sample_tfidf", "sample_two_stage", "sample_uniform",
    "small_sample_warning", "tokenize",
]
