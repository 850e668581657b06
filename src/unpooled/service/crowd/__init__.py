"""Crowd backends: in-house annotators, Amazon Mechanical Turk, a simulated crowd (one interface)."""
