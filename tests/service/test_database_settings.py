"""The service's PostgreSQL connections run without JIT (:func:`unpooled.service.config.settings.without_jit`):
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
