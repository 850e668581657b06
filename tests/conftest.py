"""Shared fixtures. Database tests are marked ``db`` automatically (``./dev test`` re-runs them on PostgreSQL), except
those marked ``engine_neutral`` (pyproject.toml says which may be)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SHARED_DATA = Path(os.environ.get("UNPOOLED_SHARED_DATA", REPO.parent / "shared" / "data"))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("engine_neutral") is not None:
            if item.get_closest_marker("db") is not None:
                raise pytest.UsageError(f"{item.nodeid}: marked both db and engine_neutral")
            continue
        if item.get_closest_marker("django_db") is not None or "db" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.db)


@pytest.fixture(autouse=True)
def _own_upload_dir(request, tmp_path_factory):
    """Each database test gets its own upload folder: "nothing left behind" checks must not see other tests' files
    (``./dev test`` runs SQLite and PostgreSQL with one data directory)."""
    if request.node.get_closest_marker("django_db") is None:
        yield
        return
    from django.conf import settings

    old = settings.UPLOAD_DIR
    settings.UPLOAD_DIR = tmp_path_factory.mktemp("uploads")
    try:
        yield
    finally:
        settings.UPLOAD_DIR = old


@pytest.fixture(scope="session", autouse=True)
def _own_wait_slots(tmp_path_factory):
    """Each test process has its own ``?wait=`` slots: the machine's are shared by every process, and a test that
    holds one (tests/security/test_security_uploads.py) made another process's upload answer without waiting."""
    from django.conf import settings

    old = settings.UPLOAD_WAIT_DIR
    settings.UPLOAD_WAIT_DIR = tmp_path_factory.mktemp("wait-slots")
    yield
    settings.UPLOAD_WAIT_DIR = old


@pytest.fixture(autouse=True)
def _empty_cache(request):
    """Each database test starts with an empty cache: cached pages and the scoring path's memoised answers, strata
    and fits are keyed by row ids, which a rolled-back test gives out again (in production ids are never reused;
    a corpus of another schema under the same ids once got the strata of the test before)."""
    if request.node.get_closest_marker("django_db") is not None:
        from django.core.cache import caches

        from unpooled.service.annotation import views
        from unpooled.service.evaluations import scoring

        for alias in ("default", "signin"):
            caches[alias].clear()
        views.forget()
        scoring.clear_cache()
    yield


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "redocred").is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (set UNPOOLED_SHARED_DATA)")
    return SHARED_DATA


def load_redocred_subset(shared_data: Path, tmp_path: Path, n: int, name: str, *, team: str = "team", run: str = "run",
                         control_share: float = 0.0):
    """The first ``n`` Re-DocRED dev documents as corpus ``name``, with the original DocRED labels of
    those documents ingested as a submission; returns (corpus, submission, path of the corpus file)."""
    import json

    from unpooled.core.corpus import iter_documents
    from unpooled.core.kb.docred import docred_to_jsonl
    from unpooled.service.annotation import actions
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.submissions.actions import do_ingest_submission

    data = json.loads((shared_data / "redocred" / "dev_revised.json").read_text())[:n]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    corpus = do_load_corpus(path, "docred", name)
    st = actions.settings_for(corpus)
    st.control_share = control_share
    st.save()
    kb = tmp_path / f"{name}.jsonl"
    with open(kb, "w") as out:
        docred_to_jsonl(iter_documents(path, "docred"), out)
    res = do_ingest_submission(kb, name, team, run, "jsonl")
    assert res.ok, res.report.to_dict()
    return corpus, res.submission, path


def scratch(name: str) -> Path:
    """A path ``name`` in a new folder of the test's own (the data directory is shared by the suite's processes:
    two tests writing one file name there at once read each other's half-written file)."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="unpooled-test-")) / name


def at_once(n: int, fn) -> tuple[list, list]:
    """``fn(i)`` in ``n`` threads released together, each on its own database connection: (results, errors).
    Real concurrency on PostgreSQL (the SQLite test database is in memory)."""
    import threading

    from django.db import connections

    results, errors = [], []
    barrier = threading.Barrier(n)

    def one(i):
        try:
            barrier.wait()
            results.append(fn(i))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors
