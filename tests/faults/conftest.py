"""Fixtures of the fault tests: a migrated SQLite template, data directories, `unpooled serve` instances that are
always stopped (by pid) at the end of the test."""

from __future__ import annotations

import os

import pytest

from .harness import Service, drop_postgres, fresh_postgres, migrated_sqlite, prepare_data_dir, service_env

#: the PostgreSQL server whose fresh databases the tests of both databases use
PG_URL = os.environ.get("UNPOOLED_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    return migrated_sqlite(tmp_path_factory.mktemp("sqlite-template"))


@pytest.fixture
def sqlite_env(tmp_path, sqlite_template):
    """The environment of a service on a fresh (migrated) SQLite data directory."""
    return service_env(prepare_data_dir(tmp_path / "data", sqlite_template))


@pytest.fixture(params=["sqlite", "postgresql"])
def env(request, sqlite_env, tmp_path):
    """A service environment on a fresh SQLite data directory, then on a fresh database of the PostgreSQL server of
    ``UNPOOLED_TEST_POSTGRES_URL`` (skipped when it does not answer)."""
    if request.param == "sqlite":
        yield sqlite_env
        return
    pg = fresh_postgres(PG_URL)
    if pg is None:
        pytest.skip(f"PostgreSQL does not answer at {PG_URL}")
    conn, name, url = pg
    try:
        yield service_env(tmp_path / "pgdata", url)
    finally:
        drop_postgres(conn, name)


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
