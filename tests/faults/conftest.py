"""Fixtures of the fault tests: a migrated SQLite template, data directories, `unpooled serve` instances that are
always stopped (by pid) at the end of the test."""

from __future__ import annotations

import pytest

from .harness import Service, migrated_sqlite, prepare_data_dir, service_env


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    return migrated_sqlite(tmp_path_factory.mktemp("sqlite-template"))


@pytest.fixture
def sqlite_env(tmp_path, sqlite_template):
    """The environment of a service on a fresh (migrated) SQLite data directory."""
    return service_env(prepare_data_dir(tmp_path / "data", sqlite_template))


@pytest.fixture
def serve(tmp_path):
    """``serve(env, **options)`` starts ``unpooled serve``; each one is stopped when the test ends."""
    started: list[Service] = []

    def start(env, **kw) -> Service:
        s = Service(env, tmp_path / f"serve-{len(started)}.log", **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()
