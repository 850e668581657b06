"""Evaluations: draws from each submission's sampling distribution, and the scores estimated from them."""
