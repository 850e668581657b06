"""D9: a corrupt entry of the file cache is a miss that is rebuilt, never a 500.

The probe cut the files of ``$UNPOOLED_DATA_DIR/cache`` in half, then to 100 bytes: the leaderboard (page and
API) and the submission page answered 500 (``zlib.error``) until the entry's key changed, up to a day later.
Here the real file cache of the service (``SafeFileBasedCache``) is filled by the pages, every file is
damaged in one of several ways, and each page must answer as before and put a readable entry back.
(The same against a running ``unpooled serve``: ``test_serve_availability.py``.)
"""

from __future__ import annotations

import os
import pickle
import re
import time
import zlib
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import Client, override_settings

from unpooled.service.config.cache import SafeFileBasedCache

from ..service.test_api import auth, corpus, people, publish, score, subs  # noqa: F401  (fixtures)


def _pickle_of_a_missing_class() -> bytes:
    """A valid entry whose value names a class that no longer exists (an entry written by another version)."""
    body = b"\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x0bno_such_mod\x94\x8c\x05Thing\x94\x93\x94)\x81\x94."
    return pickle.dumps(time.time() + 3600) + zlib.compress(body)


CORRUPTIONS = {
    "half": lambda data: data[: len(data) // 2],
    "100 bytes": lambda data: data[:100],
    "empty": lambda data: b"",
    "garbage": lambda data: os.urandom(max(64, len(data))),
    "header only": lambda data: pickle.dumps(time.time() + 3600),
    "bad body": lambda data: pickle.dumps(time.time() + 3600) + b"\x78\x9c not zlib at all",
    "bad header": lambda data: b"\x80\x04\x95garbage" + data[20:],
    "header not a number": lambda data: pickle.dumps("soon") + data[len(pickle.dumps(1.0)):],
    "missing class": lambda data: _pickle_of_a_missing_class(),
}


def _damage(folder: Path, how: str) -> int:
    files = sorted(folder.glob("*.djcache"))
    for f in files:
        f.write_bytes(CORRUPTIONS[how](f.read_bytes()))
    return len(files)


def _readable(folder: Path) -> int:
    """How many entries read back whole (expiry header, then the compressed pickle)."""
    n = 0
    for f in folder.glob("*.djcache"):
        with open(f, "rb") as fh:
            pickle.load(fh)
            pickle.loads(zlib.decompress(fh.read()))
        n += 1
    return n


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_backend_treats_a_corrupt_entry_as_a_miss(tmp_path, how):
    c = SafeFileBasedCache(str(tmp_path / "c"), {})
    c.set("k", {"rows": list(range(1000))}, 600)
    c.set("other", "kept", 600)
    fname = Path(c._key_to_file("k"))
    fname.write_bytes(CORRUPTIONS[how](fname.read_bytes()))
    assert c.get("k", "miss") == "miss"
    assert not fname.exists() or how == "empty"  # removed (an empty one is an expired entry: removed on has_key)
    assert c.get("other") == "kept"
    big = {"rows": list(range(1000))}
    for op in (lambda: c.has_key("k"), lambda: c.touch("k"), lambda: c.add("k", 1)):
        c.set("k", big, 600)
        fname.write_bytes(CORRUPTIONS[how](fname.read_bytes()))
        assert op() in (False, True)  # never raises
    c.set("k", big, 600)
    fname.write_bytes(CORRUPTIONS[how](fname.read_bytes()))
    assert c.get_or_set("k", lambda: "rebuilt", 600) == "rebuilt"
    assert c.get("k") == "rebuilt" and c.touch("k") is True and c.get("k") == "rebuilt"
    assert c.get("never-set") is None


@pytest.fixture
def file_cache(tmp_path):
    folder = tmp_path / "cache"
    caches = {"default": {"BACKEND": "unpooled.service.config.cache.SafeFileBasedCache", "LOCATION": str(folder),
                          "OPTIONS": {"MAX_ENTRIES": 20000}},
              "signin": {"BACKEND": "unpooled.service.config.cache.SafeFileBasedCache", "LOCATION": str(folder / "signin"),
                         "OPTIONS": {"MAX_ENTRIES": 1_000_000}}}
    with override_settings(CACHES=caches, SESSION_ENGINE="django.contrib.sessions.backends.cached_db"):
        cache.clear()
        yield folder


def _unmasked(html: str) -> str:
    return re.sub(r'(name="csrfmiddlewaretoken" value|data-csrf-token)="[^"]*"', "", html)


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["half", "100 bytes", "garbage", "empty", "bad body", "missing class"])
def test_pages_survive_a_corrupt_cache(file_cache, corpus, people, subs, how):
    """Leaderboard page and API, submission page, a task's body and a signed-in session, each served from the
    file cache; then every file damaged: the same answers, and the entries are rebuilt."""
    from unpooled.service.annotation import actions as annotation
    from unpooled.service.annotation import views as annotation_views
    from unpooled.service.annotation.models import Task
    from unpooled.service.submissions.models import RelationInstance

    pub = subs["red_pub"]
    score(pub, f1=0.7, lo=0.6, hi=0.8)
    score(subs["blue_pub"], f1=0.5, lo=0.4, hi=0.6)
    publish(pub, subs["blue_pub"])
    annotation.request_verification(pub, RelationInstance.objects.filter(submission=pub).values_list("pk", flat=True))
    task = Task.objects.order_by("pk").first()
    signed_in = Client()
    signed_in.force_login(people["alice"])
    anon = Client()
    pages = [(anon, "/corpora/fixture/leaderboard/"), (signed_in, "/corpora/fixture/leaderboard/"),
             (anon, "/api/corpora/fixture/leaderboard"), (anon, f"/submissions/{pub.pk}/"),
             (signed_in, f"/submissions/{pub.pk}/"), (signed_in, "/")]

    def visit() -> list[str]:
        out = []
        for c, url in pages:
            resp = c.get(url)
            assert resp.status_code == 200, (url, resp.status_code, resp.content[:300])
            out.append(_unmasked(resp.content.decode()))
        out.append(str(annotation_views._body(task)))
        return out

    first = visit()
    assert "red/r-pub" in first[0] and "red/r-pub" in first[2]
    n = len(list(file_cache.glob("*.djcache")))
    assert n >= 6  # leaderboards (rows and rendered tables), submission pages, the task body, the session
    annotation_views.forget()
    assert _damage(file_cache, how) == n
    again = visit()
    assert again == first
    assert signed_in.get("/api/me").json()["user"] == "alice"  # the session survived through the database
    assert _readable(file_cache) >= n - 1  # rebuilt (a damaged entry nobody asked for again may stay unread)
