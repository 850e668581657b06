"""Annotation: tasks (verify an instance, annotate a document's entities or relations), assignment
with leases, answers, aggregated labels, gold controls, budgets and exhaustive document samples."""
