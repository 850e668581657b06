"""The service's PostgreSQL connections: without JIT (:func:`unpooled.service.config.settings.without_jit`):
PostgreSQL compiled the crowd path's queries for 0.5-1 s a call at 20,000 open items (``unpooled bench lease``)."""

from __future__ import annotations

import pytest
from django.db import connection

from unpooled.service.config.settings import without_jit


@pytest.mark.parametrize("given, expected", [
    ("", "-c jit=off"),
    ("-c statement_timeout=5000", "-c statement_timeout=5000 -c jit=off"),
    ("-c jit=on", "-c jit=on"),  # DATABASE_URL's ?options= may ask for it
    ("-c jit = on -c work_mem=64MB", "-c jit = on -c work_mem=64MB"),
    ("-c jit_above_cost=1e7", "-c jit_above_cost=1e7 -c jit=off"),
])
def test_without_jit_adds_jit_off_unless_asked_otherwise(given, expected):
    assert without_jit(given) == expected


@pytest.mark.django_db
def test_postgres_connections_run_without_jit():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    with connection.cursor() as c:
        c.execute("SHOW jit")
        assert c.fetchone()[0] == "off"


@pytest.mark.django_db
def test_json_columns_are_bulk_inserted_as_values_not_a_quoted_unnest():
    """Django 5.2 bulk-inserts through ``UNNEST`` of a ``jsonb[]`` that psycopg quotes in Python (a breakdown's 300
    documents a re-scoring took a tenth of the full-size worker's time); :class:`unpooled.service.fields.JSONField`
    keeps ``VALUES``.  The documents come back as they went in, quotes and backslashes included."""
    from django.test.utils import CaptureQueriesContext

    from unpooled.service.corpora.models import RelationSchema

    docs = [{"relations": [{"name": f'r{i} "q" \\ {{x}}', "ok": [i, 0.5, None]}]} for i in range(3)]
    with CaptureQueriesContext(connection) as seen:
        RelationSchema.objects.bulk_create([RelationSchema(name=f"s{i}", definition=d) for i, d in enumerate(docs)])
    insert = [q["sql"] for q in seen.captured_queries if q["sql"].startswith("INSERT")]
    assert len(insert) == 1 and "UNNEST" not in insert[0].upper()
    assert [s.definition for s in RelationSchema.objects.filter(name__startswith="s").order_by("name")] == docs
