"""Baseline relation extractors (real models, for the demo and for comparison)."""
