"""Signals the annotation app sends; other apps connect to them (the annotation app imports none of them)."""

from django.dispatch import Signal

#: a label (verification) or an exhaustive relation layer was written for ``corpus_id``; receivers run inside the
#: writing transaction (:func:`unpooled.service.evaluations.tasks.notify_labels` defers its work to commit)
labels_written = Signal()
