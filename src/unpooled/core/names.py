"""The registry of names the CLI, the API, the pages and the service share: one tuple each, owned by the module
that implements the choice, re-exported here so a choice list is never written twice.

* :data:`LEVELS` -- sampling levels of :math:`p_i` (:mod:`unpooled.core.estimators.sampling`);
* :data:`ESTIMATORS`, :data:`WEIGHTS` -- estimators and weight rules (:mod:`unpooled.core.estimators.joint`);
* :data:`MATCHES` -- recall matching policies (:mod:`unpooled.core.offline`);
* :data:`RECALL_PROTOCOLS` -- which true instances recall counts, with :data:`PROTOCOL_LABELS` its report names
  (:mod:`unpooled.core.estimators.exhaustive`);
* :data:`CORPUS_FORMATS` -- corpus formats (:mod:`unpooled.core.corpus.loaders`);
* :data:`KB_FORMATS` -- submission formats (:mod:`unpooled.core.kb`);
* :data:`CONFUSION_SOURCES` -- where the annotators' error rates come from (:mod:`unpooled.core.annotation.confusion`).

``confidence`` always names an interval's confidence level, ``level`` the sampling level.
"""

from __future__ import annotations

from .annotation.confusion import SOURCES as CONFUSION_SOURCES
from .corpus.loaders import FORMATS as CORPUS_FORMATS
from .errors import check_choice
from .estimators.exhaustive import PROTOCOL_LABELS, RECALL_PROTOCOLS
from .estimators.joint import ESTIMATORS, WEIGHTS
from .estimators.sampling import LEVELS
from .kb import KB_FORMATS
from .offline import MATCHES

__all__ = ["CONFUSION_SOURCES", "CORPUS_FORMATS", "ESTIMATORS", "KB_FORMATS", "LEVELS", "MATCHES", "PROTOCOL_LABELS",
           "RECALL_PROTOCOLS", "WEIGHTS", "check_choice"]
