"""Corpora: documents (with an optional gold layer), loaders and sentence splitting."""

from __future__ import annotations

from .loaders import FORMATS, detect_format, iter_documents
from .model import Document, GoldEntity, GoldMention, GoldRelation
from .sentences import split_markup_sentences, split_sentences

__all__ = [
    "FORMATS",
    "Document",
    "GoldEntity",
    "GoldMention",
    "GoldRelation",
    "detect_format",
    "iter_documents",
    "split_markup_sentences",
    "split_sentences",
]
