"""Settings for the test suite: the production settings with a throwaway data directory."""

import os
import tempfile

os.environ.setdefault("UNPOOLED_DATA_DIR", tempfile.mkdtemp(prefix="unpooled-test-"))
# one sampling key for every run of the suite: the service's own draws (and so every figure a test checks) are the
# same in each run instead of depending on a secret generated into the throwaway data directory
os.environ.setdefault("UNPOOLED_SAMPLING_SECRET", "unpooled-test-suite")
# 20 bootstrap refits of the crowd's confusions, not 100 (they were half to three quarters of every evaluating
# test's time; the processes the tests start inherit it): the suite checks what the service computes with them, the
# bootstrap's own behaviour is the core's tests' (tests/core/test_confusion.py) and `unpooled simulate regimes`'
os.environ.setdefault("UNPOOLED_RATE_REPLICATES", "20")

from .settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
RESCORE_DELAY_SECONDS = 0.0  # tests run the re-scoring task at once
# one cache per test process, emptied by nothing: cached entries are keyed by fingerprints (as in production)
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "OPTIONS": {"MAX_ENTRIES": 5000}},
          "signin": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "signin"}}
# the suite's clients all come from one address: the per-address limit of fresh renders is tested where it is set
RENDERS_PER_ADDRESS = 10**6
