"""Shared fixtures. Database tests are marked ``db`` automatically (``./dev test`` re-runs them on PostgreSQL)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SHARED_DATA = Path(os.environ.get("UNPOOLED_SHARED_DATA", REPO.parent / "shared" / "data"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("django_db") is not None or "db" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.db)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "redocred").is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (set UNPOOLED_SHARED_DATA)")
    return SHARED_DATA
