"""``/docs/`` serves the built documentation site: only its files, with the theme's inline scripts allowed by hash,
and a page saying how to build it when it is not built."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest
from django.test import override_settings

pytestmark = [pytest.mark.engine_neutral, pytest.mark.django_db]

SCRIPT = b"var x = 1;"


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    (root / "method").mkdir(parents=True)
    (root / "assets").mkdir()
    (root / "index.html").write_bytes(b"<html><script>" + SCRIPT + b"</script><script src='a.js'></script>home</html>")
    (root / "method" / "index.html").write_bytes(b"<html>method</html>")
    (root / "assets" / "site.css").write_bytes(b"body{}")
    (root / ".hidden").write_bytes(b"secret")
    (tmp_path / "outside.txt").write_bytes(b"outside the site")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    with override_settings(DOCS_DIR=root):
        yield root


def test_pages_folders_and_assets_are_served(client, site):
    got = client.get("/docs/")
    assert got.status_code == 200 and b"home" in b"".join(got.streaming_content)
    assert got["Content-Type"].startswith("text/html")
    got = client.get("/docs/method/")
    assert got.status_code == 200 and b"method" in b"".join(got.streaming_content)
    assert client.get("/docs/assets/site.css")["Content-Type"].startswith("text/css")
    got = client.get("/docs/method")
    assert got.status_code == 302 and got["Location"] == "/docs/method/"


def test_the_inline_scripts_of_a_page_and_no_other_are_allowed(client, site):
    csp = client.get("/docs/")["Content-Security-Policy"]
    digest = base64.b64encode(hashlib.sha256(SCRIPT).digest()).decode()
    script_src = next(d for d in csp.split("; ") if d.startswith("script-src "))
    assert script_src == f"script-src 'self' 'sha256-{digest}'"
    assert "unsafe-inline" not in script_src
    assert "sha256" not in client.get("/docs/method/")["Content-Security-Policy"]


@pytest.mark.parametrize("path", [
    "/docs/../outside.txt", "/docs/%2e%2e/outside.txt", "/docs/method/%2e%2e/%2e%2e/outside.txt",
    "/docs/..%2foutside.txt", "/docs/%2fetc/passwd", "/docs//etc/passwd", "/docs/.hidden", "/docs/link.txt",
    "/docs/method\\..\\..\\outside.txt", "/docs/nope/", "/docs/nope.html",
])
def test_nothing_outside_the_site_nor_hidden_is_served(client, site, path):
    got = client.get(path)
    assert got.status_code == 404, (path, got.status_code)
    body = got.content if not got.streaming else b"".join(got.streaming_content)
    assert b"outside the site" not in body and b"secret" not in body


def test_only_reading(client, site):
    assert client.post("/docs/").status_code == 405
    assert client.head("/docs/").status_code == 200


def test_a_site_not_built_says_how_to_build_it(client, tmp_path):
    with override_settings(DOCS_DIR=tmp_path / "absent"):
        got = client.get("/docs/method/")
    assert got.status_code == 503
    text = got.content.decode()
    assert "./dev docs" in text and "mkdocs build" in text and "UNPOOLED_DOCS_DIR" in text
