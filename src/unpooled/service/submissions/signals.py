"""Signals the submissions app sends; other apps connect to them (the submissions app imports none of them)."""

from django.dispatch import Signal

#: a submission was stored and its evaluation should start (``submission``); receivers run inside the storing
#: transaction (:func:`unpooled.service.evaluations.tasks.enqueue_advance` defers its work to commit)
submission_stored = Signal()
