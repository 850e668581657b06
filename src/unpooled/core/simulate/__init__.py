"""Simulations: a synthetic TAC-like world, pooling bias, estimators and adaptive labelling."""
