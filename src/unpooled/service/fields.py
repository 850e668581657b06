"""Model fields shared by the service's apps.

:class:`JSONField` is Django's, inserted row by row's way on PostgreSQL.  Django 5.2 inserts a ``bulk_create``'s
rows through ``UNNEST`` of one array per column; with psycopg's client-side binding a ``jsonb[]`` array is quoted
in Python, a callback per ``"`` of every document, about seven times the CPU of the same rows as ``VALUES``
(100 documents of 34 KB: 0.36 against 0.05 CPU-s).  A breakdown is such a document, 300 of them a re-scoring:
the full-size shared task's worker spent a tenth of its time quoting them.  A field with ``get_placeholder``
makes Django keep ``VALUES`` (its own rule in ``postgresql/compiler.py``); the column, its migrations and every
query are unchanged.
"""

from __future__ import annotations

from django.db import models


class JSONField(models.JSONField):
    """Django's JSONField whose bulk inserts use ``VALUES`` rather than an ``UNNEST`` quoted in Python."""

    def get_placeholder(self, value, compiler, connection) -> str:
        return "%s"

    def deconstruct(self):
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs  # the same column: no migration
