"""What the service evaluates and how: the sampling levels it scores, the label rule, the confidence of every
published interval (the registry the views, the API, the console, the tasks and the CLI import)."""

from unpooled.core.annotation.confusion import REPLICATES  # noqa: F401 - re-exported: rate replicates per interval

#: the sampling levels every submission is scored at (a subset of :data:`unpooled.core.names.LEVELS`)
SERVICE_LEVELS = ("instance", "relation", "entity")
#: how a verified item's answers become its label (ties are "not correct")
LABEL_METHOD = "majority"
#: confidence level of every published interval
CONFIDENCE = 0.90
#: rounds of draws per level and submission: a pilot of half the plan, then the rest planned with the
#: pilot's labels (:func:`unpooled.core.estimators.adaptive.next_draws`)
SAMPLING_ROUNDS = 2
