"""Background evaluation (django-tasks; the db worker runs it). Idempotent: pending submissions only."""

from __future__ import annotations

from django_tasks import task


@task()
def evaluate_corpus(corpus: str, accuracy: float = 0.8, labels: int = 300, documents: int = 40, seed: int = 0,
                    controls: int = 100, levels: tuple[str, ...] | list[str] = ("instance", "relation", "entity")
                    ) -> dict:
    """Evaluate every pending submission of ``corpus`` through the simulated crowd, at each of ``levels``.

    With a gold layer: ``controls`` gold control items are created first (if the corpus has none)
    to calibrate the crowd's error rates, and each row carries the system's true P, R and F1
    (``p_true``, ``r_true``, ``f1_true``; :mod:`.truth`) beside the estimate, also kept in the
    score's ``details['truth']``; ``truth_inside`` is (K, N): the truth is inside the 90% interval
    for K of the N (system, metric, level) triples.
    """
    from unpooled.service.annotation.controls import create_verify_controls
    from unpooled.service.annotation.models import Task
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.crowd.base import SimulatedBackend

    from .actions import evaluate
    from .truth import attach_truth

    c = Corpus.objects.get(name=corpus)
    if c.has_gold and controls and not Task.objects.filter(corpus=c, is_control=True).exists():
        create_verify_controls(c, controls, rng=seed)
    keys = ("submission", "team", "run", "level", "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi",
            "labels_new", "labels_reused")
    out: dict = {"warnings": [], "rows": []}
    inside = total = 0
    for level in levels:
        rep = evaluate(c, crowd=SimulatedBackend(accuracy=accuracy, seed=seed), labels=labels, documents=documents,
                       seed=seed, level=level)
        out["warnings"] += rep.warnings
        lk = keys
        if c.has_gold and rep.rows:
            k, n = attach_truth(c, rep.rows, level=level)
            inside, total = inside + k, total + n
            lk = keys + ("p_true", "r_true", "f1_true")
        out["rows"] += [{k: r.get(k) for k in lk} for r in rep.rows]
    if c.has_gold and total:
        out["truth_inside"] = (inside, total)
    return out


@task()
def advance_submission(submission_id: int) -> str:
    """Run a submission's lifecycle as far as it can go now (idempotent); returns the stage reached."""
    from unpooled.service.submissions.models import Submission

    from .lifecycle import advance

    sub = Submission.objects.filter(pk=submission_id).select_related("corpus", "team").first()
    if sub is None:
        return "gone"
    return advance(sub)


@task()
def labels_arrived(corpus_id: int) -> dict:
    """A batch of labels arrived: re-score every submission of the corpus; publish those whose labels are in."""
    from unpooled.service.corpora.models import Corpus

    from .lifecycle import on_labels

    corpus = Corpus.objects.filter(pk=corpus_id).first()
    return on_labels(corpus) if corpus is not None else {}
