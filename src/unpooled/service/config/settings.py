"""Django settings, all from the environment.

==============================  ================================================
variable                        meaning (default)
==============================  ================================================
``DATABASE_URL``                database (``sqlite:///$UNPOOLED_DATA_DIR/unpooled.sqlite3``);
                                ``postgres://user@host:5432/name`` for the distributed mode (its connections run
                                with PostgreSQL's JIT off unless ``?options=-c%20jit%3Don`` says otherwise:
                                :func:`without_jit`)
``UNPOOLED_DATA_DIR``           where the SQLite file, uploads and the secret key live
                                (``~/.local/share/unpooled``); made 0700, the secret key, the SQLite
                                file and uploads 0600 (created so)
``UNPOOLED_SECRET_KEY``         Django secret key (generated once into the data directory)
``UNPOOLED_SAMPLING_SECRET``    the key of the service's own samples of submitted runs (generated once into the
                                data directory, ``sampling_secret``): submitters cannot predict which of their
                                instances get checked; with it the samples are reproduced (``unpooled corpus audit``)
``UNPOOLED_DEBUG``              ``1`` for debug pages (off)
``UNPOOLED_ALLOWED_HOSTS``      comma-separated host names (``localhost,127.0.0.1,[::1]``)
``UNPOOLED_MAX_UPLOAD_BYTES``   largest accepted submission, decompressed (2 GiB)
``UNPOOLED_TASK_BACKEND``       ``db`` (django-tasks-db worker, default) or ``immediate``
``UNPOOLED_WORKER_TIMEOUT``     seconds without a heartbeat after which a task worker is dead and its
                                running tasks are requeued by the others (300; the same on every machine)
``UNPOOLED_WORKER_HEARTBEAT``   seconds between a worker's heartbeats and sweeps (30)
``UNPOOLED_UPLOAD_ORPHAN_SECONDS`` seconds after its last write when an upload file that no task uses is left
                                over from a killed web process and deleted by a worker's sweep (3600)
``UNPOOLED_CACHE``              where rendered pages and built leaderboards are kept: a folder
                                shared by the web workers and the task worker of one machine
                                (``$UNPOOLED_DATA_DIR/cache``; a corrupt entry is a miss), or ``memory``
                                (per process)
``UNPOOLED_UPLOAD_REJECTS_PER_DAY``  rejected uploads per team and per user in 24 hours (20)
``UNPOOLED_UPLOAD_REJECTS_PER_ADDRESS``  rejected uploads per client address in 24 hours (60; 0: none)
``UNPOOLED_UPLOADS_PENDING``    uploads of a team waiting for validation at once (3)
``UNPOOLED_UPLOADS_PER_ADDRESS``  uploads accepted or waiting per client address in 24 hours, whatever the
                                team (30; 0: none)
``UNPOOLED_UPLOAD_RESULT_HOURS``  how long an upload's outcome is kept (48)
``UNPOOLED_UPLOAD_WAIT_SECONDS``  the longest ``?wait=`` of one request (5); ``UNPOOLED_UPLOAD_WAIT_SLOTS``:
                                requests per machine waiting at once (1), counted by lock files in
                                ``UNPOOLED_UPLOAD_WAIT_DIR`` (``$UNPOOLED_DATA_DIR/run``; one folder per machine)
``UNPOOLED_RATE_REPLICATES``    bootstrap refits of the crowd's confusions behind every interval (100); fewer
                                are cheaper and give rougher intervals
``UNPOOLED_DOCS_DIR``           the built documentation site served at ``/docs/`` (``$UNPOOLED_DATA_DIR/docs-site``)
``UNPOOLED_SECURE``             ``1`` behind TLS: cookies only over HTTPS (``Secure``), HSTS for a year,
                                and ``X-Forwarded-Proto: https`` from the proxy marks a request
                                secure (the proxy must set or strip that header) (off)
==============================  ================================================
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from pathlib import Path

import dj_database_url

from unpooled.core.annotation.confusion import REPLICATES
from unpooled.core.kb.lines import Limits

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("UNPOOLED_DATA_DIR", Path.home() / ".local" / "share" / "unpooled")).expanduser()
# private files are created private (0600 files, 0700 folders), never at the umask's mode and chmod-ed after
DATA_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
#: uploaded files while they wait for validation (0700; each file 0600: unpooled.service.submissions.uploads)
UPLOAD_DIR = DATA_DIR / "uploads"
#: the built documentation site served at /docs/ (``./dev up`` and ``./dev docs`` build it there)
DOCS_DIR = Path(os.environ.get("UNPOOLED_DOCS_DIR") or DATA_DIR / "docs-site").expanduser()


def without_jit(options: str) -> str:
    """The ``options`` of the service's PostgreSQL connections (``DATABASE_URL``'s ``?options=``) with ``-c jit=off``
    added, unless they set ``jit`` themselves.

    PostgreSQL compiles a query whose estimated cost passes ``jit_above_cost`` (100,000 by default).  The crowd
    path's queries are estimated over every open item though they stop early (the first 64 candidates, 1,001 items
    counted, an ``EXISTS``): at 20,000 open items a lease from the web queue and a count of the items left spent
    0.5-1 s compiling what ran in 2-40 ms, every call (``unpooled bench lease``).  The scoring's big reads (a million
    instances) are no faster with it: their time is Python's (docs/scaling.md)."""
    if re.search(r"jit\s*=", options):  # (no other setting's name ends in jit)
        return options
    return f"{options} -c jit=off".strip()


def _create_private(path: Path, data: bytes) -> None:
    """Make ``path`` holding ``data``, readable by its owner only from its first byte: written to a 0600
    temporary file, then linked under its name at once (if another process made it first, theirs stays)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _owner_only(*paths) -> None:
    """A data directory made by an older version had the umask's modes (the SQLite file 0644, uploads/ 0755):
    what exists and is ours loses its group and other bits."""
    for p in paths:
        try:
            st = os.stat(p)
            if st.st_uid == os.getuid() and st.st_mode & 0o077:
                os.chmod(p, st.st_mode & 0o700)
        except OSError:
            pass


def _secret(variable: str, name: str) -> str:
    """``$variable``, else the data directory's file ``name`` (made once, 0600, holding a new random secret)."""
    if os.environ.get(variable):
        return os.environ[variable]
    path = DATA_DIR / name
    if not path.exists():
        _create_private(path, secrets.token_urlsafe(50).encode())
    return path.read_text().strip()


_owner_only(DATA_DIR / "secret_key", DATA_DIR / "sampling_secret", UPLOAD_DIR)
SECRET_KEY = _secret("UNPOOLED_SECRET_KEY", "secret_key")
#: kept apart from SECRET_KEY: an organiser can hand it to an auditor without handing over the sessions' key
SAMPLING_SECRET = _secret("UNPOOLED_SAMPLING_SECRET", "sampling_secret")
DEBUG = os.environ.get("UNPOOLED_DEBUG", "") in ("1", "true", "yes")
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("UNPOOLED_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",") if h.strip()]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_tasks",
    "django_tasks_db",
    "unpooled.service.corpora",
    "unpooled.service.accounts",
    "unpooled.service.submissions",
    "unpooled.service.annotation",
    "unpooled.service.evaluations",
    "unpooled.service.organiser",
    "unpooled.service.web",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "unpooled.service.config.security.SecurityHeaders",
    "unpooled.service.config.middleware.RefuseNulMiddleware",  # a NUL in the URL: 400, before any lookup
    "unpooled.service.config.middleware.RefuseLargeBodyMiddleware",  # a large body but to an upload: 413, unread
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "unpooled.service.config.urls"
WSGI_APPLICATION = "unpooled.service.config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "unpooled.service.accounts.context.nav",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{DATA_DIR / 'unpooled.sqlite3'}", conn_max_age=60
    )
}
# a persistent connection is checked before its first use in a request: after a database restart each process
# reconnects instead of answering one 500 (tests/faults/test_postgres_restart.py)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # the database holds password hashes, token digests, sessions and private submissions: an empty file is a
    # new SQLite database, made 0600 before SQLite opens it (its -wal and -shm files take the same mode)
    _db = str(DATABASES["default"].get("NAME") or "")
    if _db and _db != ":memory:" and not _db.startswith("file:") and not os.path.exists(_db):
        Path(_db).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            os.close(os.open(_db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
    _owner_only(_db, f"{_db}-wal", f"{_db}-shm")
    # WAL lets the web server read while the worker writes; IMMEDIATE avoids lock-upgrade deadlocks.
    # persistent connections: opening one (and its PRAGMAs) was a third of a cached page's time
    DATABASES["default"]["CONN_MAX_AGE"] = 60
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
        }
    )

elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _options["options"] = without_jit(_options.get("options", ""))

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Cached pages and leaderboards are keyed by fingerprints of what they show (a new score, a publication,
# a visibility change give a new key), so a cache per machine is never stale across machines. A folder
# is shared by the processes of a machine: a page rendered by one gunicorn worker is served by the others.
_cache = os.environ.get("UNPOOLED_CACHE", "").strip()
_cache_dir = Path(_cache).expanduser() if _cache and _cache != "memory" else DATA_DIR / "cache"


def _a_cache(folder: Path, entries: int) -> dict:
    if _cache == "memory":
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": folder.name,
                "OPTIONS": {"MAX_ENTRIES": entries}}
    return {"BACKEND": "unpooled.service.config.cache.SafeFileBasedCache",  # a corrupt entry is a miss
            "LOCATION": str(folder), "OPTIONS": {"MAX_ENTRIES": entries}}


CACHES = {
    "default": _a_cache(_cache_dir, 5000 if _cache == "memory" else 20000),
    # the sign-in throttle's counters (accounts/throttle.py), apart: pages flooding the default cache would cull
    # them with it (a third of its entries at random when full: security review N6)
    "signin": _a_cache(_cache_dir / "signin", 1_000_000),
}
# sessions are read from the cache and written through to the database (a logged-in page reads no session row)
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

TASKS = {
    "default": {
        "BACKEND": (
            "django_tasks.backends.immediate.ImmediateBackend"
            if os.environ.get("UNPOOLED_TASK_BACKEND") == "immediate"
            else "django_tasks_db.DatabaseBackend"
        )
    }
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

LIMITS = Limits.from_env()
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
# request bodies being received live on the data directory's filesystem (not /tmp); what a killed web process
# leaves there is deleted by the task workers (unpooled.service.workers.sweep_uploads)
FILE_UPLOAD_TEMP_DIR = str(UPLOAD_DIR / "partial")
Path(FILE_UPLOAD_TEMP_DIR).mkdir(mode=0o700, parents=True, exist_ok=True)
# sign-in: every password check goes through the throttle (per account, per address: accounts/throttle.py)
AUTHENTICATION_BACKENDS = ["unpooled.service.accounts.throttle.ThrottledModelBackend"]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# cookies and transport: no script reads a cookie (the CSRF token is in the pages); behind TLS
# (UNPOOLED_SECURE=1) cookies travel over HTTPS only and browsers are told to use HTTPS for a year
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
CSRF_FAILURE_VIEW = "unpooled.service.web.views.errors.csrf_failure"  # the site's page, not Django's bare one
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
SECURE = os.environ.get("UNPOOLED_SECURE", "").strip().lower() in ("1", "true", "yes", "on")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE
SECURE_HSTS_SECONDS = 31536000 if SECURE else 0
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if SECURE else None
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/accounts/home/"
LOGOUT_REDIRECT_URL = "/"  # the home page, not the admin's "Logged out" page
# accounts made from one address in a day on the sign-up page (accounts/throttle.py)
SIGNUPS_PER_ADDRESS = int(os.environ.get("UNPOOLED_SIGNUPS_PER_ADDRESS", "10"))
# submission pages made afresh (not from the page cache) a minute for one address not signed in
RENDERS_PER_ADDRESS = int(os.environ.get("UNPOOLED_RENDERS_PER_ADDRESS", "60"))
# a team made by sign-up may submit only once an organiser approved it (the console's Teams page; security review N7)
TEAM_APPROVAL = os.environ.get("UNPOOLED_TEAM_APPROVAL", "").strip().lower() in ("1", "true", "yes", "on")
# items one in-house annotator may skip in an hour (annotation/leasing.py)
SKIPS_PER_HOUR = int(os.environ.get("UNPOOLED_SKIPS_PER_HOUR", "20"))
# a label batch is re-scored this many seconds after its first label (later labels join the same re-scoring)
RESCORE_DELAY_SECONDS = float(os.environ.get("UNPOOLED_RESCORE_DELAY", "2"))
# bootstrap refits of the crowd's confusions (service/evaluations/rates.py)
RATE_REPLICATES = int(os.environ.get("UNPOOLED_RATE_REPLICATES", str(REPLICATES)))
# submission quotas per team when an organiser has set none (empty: unlimited)
QUOTA_PER_DAY = int(os.environ["UNPOOLED_QUOTA_PER_DAY"]) if os.environ.get("UNPOOLED_QUOTA_PER_DAY") else 10
QUOTA_TOTAL = int(os.environ["UNPOOLED_QUOTA_TOTAL"]) if os.environ.get("UNPOOLED_QUOTA_TOTAL") else None
# uploads that store nothing still cost the task worker: rejected (or crashed) validations in 24 hours per team
# and per user, and per client address (0: no limit; behind a reverse proxy every client has the proxy's
# address), and uploads waiting for validation at once per team (organisers are not limited)
UPLOAD_REJECTS_PER_DAY = int(os.environ.get("UNPOOLED_UPLOAD_REJECTS_PER_DAY", "20"))
UPLOAD_REJECTS_PER_ADDRESS = int(os.environ.get("UNPOOLED_UPLOAD_REJECTS_PER_ADDRESS", "60"))
UPLOADS_PENDING = int(os.environ.get("UNPOOLED_UPLOADS_PENDING", "3"))
# uploads one client address may have accepted (or waiting) in 24 hours, whatever the team (0: no limit): the team
# quota alone bounds nothing when teams are cheap to make (security review N7)
UPLOADS_PER_ADDRESS = int(os.environ.get("UNPOOLED_UPLOADS_PER_ADDRESS", "30"))
# how long an upload's outcome (its task result, the report of a rejected file) is kept: then it is deleted
UPLOAD_RESULT_HOURS = float(os.environ.get("UNPOOLED_UPLOAD_RESULT_HOURS", "48"))
# ?wait= on the upload endpoints holds a web process: at most this many seconds per request (the client polls
# again), and at most UPLOAD_WAIT_SLOTS requests of one machine wait at once (the others answer at once)
UPLOAD_WAIT_SECONDS = float(os.environ.get("UNPOOLED_UPLOAD_WAIT_SECONDS", "5"))
UPLOAD_WAIT_SLOTS = int(os.environ.get("UNPOOLED_UPLOAD_WAIT_SLOTS", "1"))
UPLOAD_WAIT_DIR = Path(os.environ.get("UNPOOLED_UPLOAD_WAIT_DIR") or DATA_DIR / "run")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # no lease token or MTurk entry credential in the log (Django logs a 4xx with its path)
    "filters": {"redact": {"()": "unpooled.service.config.access_log.RedactFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("UNPOOLED_LOG_LEVEL", "WARNING")},
}
