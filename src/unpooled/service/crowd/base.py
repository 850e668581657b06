"""One interface over the three crowds; a corpus's ``AnnotationSettings.backend`` picks one.

``publish(corpus)`` makes the open tasks reachable by workers; ``collect(corpus)`` brings
answers in and settles what is owed.  Answers themselves always arrive through the same
path (:func:`unpooled.service.annotation.actions.submit_answer`), whoever gives them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

from unpooled.service.annotation.actions import settings_for
from unpooled.service.annotation.models import Annotator, Backend, Task
from unpooled.service.corpora.models import Corpus


class CrowdBackend(Protocol):
    name: str

    def publish(self, corpus: Corpus) -> dict: ...

    def collect(self, corpus: Corpus) -> dict: ...


class InHouseBackend:
    """Annotator accounts in the web app: open tasks are on the work queue already."""

    name = Backend.INHOUSE

    def publish(self, corpus: Corpus) -> dict:
        return {"open": Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, is_control=False).count()}

    def collect(self, corpus: Corpus) -> dict:
        return {}


class SimulatedBackend:
    """Simulated annotators answering from the corpus's gold layer."""

    name = Backend.SIMULATED

    def __init__(self, *, annotators: int = 5, accuracy: float = 0.8, bias: float = 0.0, seed: int = 0,
                 relation_rates: tuple = ()) -> None:
        self.annotators, self.accuracy, self.bias, self.seed = annotators, accuracy, bias, seed
        self.relation_rates = relation_rates

    def publish(self, corpus: Corpus) -> dict:
        return InHouseBackend().publish(corpus)

    def collect(self, corpus: Corpus) -> dict:
        """Let the simulated crowd answer every open task.  One process at a time per corpus: the simulated
        people are one pool, and one person in two processes would answer one lease twice."""
        from unpooled.service.locks import exclusive

        from .simulated import SimulatedCrowd

        with exclusive("crowd", corpus.pk):
            crowd = SimulatedCrowd.uniform(corpus, self.annotators, accuracy=self.accuracy, bias=self.bias,
                                           rng=self.seed, relation_rates=self.relation_rates)
            return crowd.run().to_dict()


class MTurkCrowd:
    """Amazon Mechanical Turk (sandbox unless ``UNPOOLED_MTURK_PRODUCTION=1``)."""

    name = Backend.MTURK

    def __init__(self, backend=None, *, base_url: str | None = None) -> None:
        from .mturk import MTurkBackend

        self.backend = backend if backend is not None else MTurkBackend.from_env()
        self.base_url = base_url or os.environ.get("UNPOOLED_PUBLIC_URL", "")

    def publish(self, corpus: Corpus) -> dict:
        from .mturk_sync import publish

        return publish(corpus, self.backend, self.base_url).to_dict()

    def collect(self, corpus: Corpus) -> dict:
        from .mturk_sync import collect

        return collect(corpus, self.backend).to_dict()


def backend_for(corpus: Corpus, **options) -> CrowdBackend:
    """The backend the corpus's annotation settings choose."""
    kind = settings_for(corpus).backend
    if kind == Backend.SIMULATED:
        return SimulatedBackend(**options)
    if kind == Backend.MTURK:
        return MTurkCrowd(**options)
    return InHouseBackend()


#: what the pages call the annotators of each backend
WHO = {Backend.SIMULATED: "simulated crowd", Backend.INHOUSE: "in-house annotators",
       Backend.MTURK: "Mechanical Turk workers"}


@dataclass
class LabelSources:
    """Where a set of labels came from (:func:`label_sources`)."""

    backend_of: dict[int, str] = field(default_factory=dict)   # annotator id -> backend
    #: per backend (in :data:`WHO`'s order): ``backend``, ``who``, ``labels`` (labels with an answer from it),
    #: ``annotators`` (distinct ones behind those labels) and, for the simulated crowd while the corpus uses it,
    #: ``accuracy``: the probability its backend (:func:`backend_for`) answers right with (else None)
    rows: list[dict] = field(default_factory=list)
    unrecorded: int = 0   # labels with no annotator recorded (written by a tool, not aggregated from answers)

    def who(self, annotators) -> str:
        """Whose answers one label aggregates (its ``Label.annotators``): "simulated crowd", "in-house annotators and
        Mechanical Turk workers", ...; "" when none is recorded."""
        got = {self.backend_of.get(i) for i in annotators or ()}
        return " and ".join(w for b, w in WHO.items() if b in got)


def label_sources(corpus: Corpus, annotator_lists) -> LabelSources:
    """Where labels of ``corpus`` came from, from the annotators each one aggregates (``annotator_lists``: their
    ``Label.annotators``) and the corpus's backend: the backends of those annotators, how many labels and
    annotators each, and the accuracy the corpus's simulated crowd answers with when it uses one.  One query."""
    lists = [list(a or ()) for a in annotator_lists]
    out = LabelSources(backend_of=dict(Annotator.objects.filter(pk__in={i for a in lists for i in a})
                                       .values_list("pk", "backend")))
    per: dict[str, tuple[list[int], set[int]]] = {}
    for a in lists:
        mine = [i for i in a if i in out.backend_of]
        if not mine:
            out.unrecorded += 1
        for b in {out.backend_of[i] for i in mine}:
            n, people = per.setdefault(b, ([0], set()))
            n[0] += 1
            people.update(i for i in mine if out.backend_of[i] == b)
    crowd = backend_for(corpus) if settings_for(corpus).backend == Backend.SIMULATED else None
    out.rows = [{"backend": b, "who": WHO[b], "labels": per[b][0][0], "annotators": len(per[b][1]),
                 "accuracy": crowd.accuracy if crowd is not None and b == Backend.SIMULATED else None}
                for b in WHO if b in per]
    return out
