"""The organiser console's own data: which task workers are alive (:mod:`unpooled.service.workers`)."""

from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """A task worker's last sign of life, written every few seconds by the worker itself.

    ``last_seen`` comes from the database's clock (not the worker machine's), so workers on
    machines with skewed clocks compare fairly.  A worker that stops cleanly deletes its row; a
    row whose ``last_seen`` is older than the worker timeout belongs to a dead worker, whose
    running tasks any live worker requeues.
    """

    worker_id = models.CharField(max_length=64, primary_key=True)
    host = models.CharField(max_length=255, blank=True)
    pid = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["worker_id"]

    def __str__(self) -> str:
        return f"{self.worker_id} (last seen {self.last_seen:%Y-%m-%d %H:%M:%S})"
