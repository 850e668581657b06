"""One interface over the three crowds; a corpus's ``AnnotationSettings.backend`` picks one.

``publish(corpus)`` makes the open tasks reachable by workers; ``collect(corpus)`` brings
answers in and settles what is owed.  Answers themselves always arrive through the same
path (:func:`unpooled.service.annotation.actions.submit_answer`), whoever gives them.
"""

from __future__ import annotations

import os
from typing import Protocol

from unpooled.service.annotation.actions import settings_for
from unpooled.service.annotation.models import Backend, Task
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
        from .mturk import MTurkBackend, MTurkConfig

        if backend is None:
            config = MTurkConfig.from_env()
            backend = MTurkBackend(config.client(), config)
        self.backend = backend
        self.base_url = base_url or os.environ.get("UNPOOLED_PUBLIC_URL", "")

    def publish(self, corpus: Corpus) -> dict:
        from .mturk_sync import publish

        if not self.base_url:
            raise ValueError("UNPOOLED_PUBLIC_URL: the public URL of this service is needed to post HITs")
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
