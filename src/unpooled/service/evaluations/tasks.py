"""Background evaluation (django-tasks; the db worker runs it). Idempotent: pending submissions only."""

from __future__ import annotations

from django_tasks import task


@task()
def evaluate_corpus(corpus: str, accuracy: float = 0.8, labels: int = 300, documents: int = 30, seed: int = 0) -> dict:
    """Evaluate every pending submission of ``corpus`` through the simulated crowd; with a gold layer,
    report each system's true precision beside the estimate."""
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.crowd.base import SimulatedBackend

    from .actions import evaluate, true_precision

    c = Corpus.objects.get(name=corpus)
    rep = evaluate(c, crowd=SimulatedBackend(accuracy=accuracy, seed=seed), labels=labels, documents=documents,
                   seed=seed)
    rows = []
    for r in rep.rows:
        row = {k: r[k] for k in ("submission", "team", "run", "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo",
                                 "f1_hi", "labels_new", "labels_reused")}
        if c.has_gold:
            row["p_true"] = true_precision(c, r["submission"])
        rows.append(row)
    return {"rows": rows, "warnings": rep.warnings}
