"""``/docs/``: the documentation site (MkDocs, built from the repository's ``docs/``), served as static files.

The built site lives in ``settings.DOCS_DIR`` (``UNPOOLED_DOCS_DIR``, default ``$UNPOOLED_DATA_DIR/docs-site``;
``./dev up`` and ``./dev docs`` build it there). Only regular files inside that folder are served: a path that
leaves it (``..``, an absolute path, a symbolic link pointing out), names a hidden file or holds a backslash is a
404. A folder answers with its ``index.html`` (after a redirect adding the ``/`` its relative links need). When
nothing is built, the page says how to build it (503), never a server error.

The theme's pages carry a few inline scripts; their SHA-256 hashes are added to the response's
Content-Security-Policy (``script-src``), so that those scripts, and no other inline script, run.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import mimetypes
import re
from pathlib import Path

from django.conf import settings
from django.http import FileResponse, Http404, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_safe

_INLINE_SCRIPT = re.compile(rb"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.S)


def site_root() -> Path:
    return Path(settings.DOCS_DIR)


def is_built(root: Path | None = None) -> bool:
    return ((root or site_root()) / "index.html").is_file()


def resolve(root: Path, path: str) -> Path | None:
    """The file or folder ``path`` names inside ``root``, or None when it is outside, hidden or absent."""
    if "\\" in path or "\x00" in path or path.startswith("/"):
        return None
    parts = [p for p in path.split("/") if p]
    if any(p.startswith(".") for p in parts):  # "..", ".git", ".htaccess": never served
        return None
    base = root.resolve()
    target = base.joinpath(*parts).resolve()
    if target != base and base not in target.parents:  # a symbolic link leading out of the site
        return None
    return target if target.exists() else None


@functools.lru_cache(maxsize=512)
def _script_hashes(path: str, mtime_ns: int) -> tuple[str, ...]:
    data = Path(path).read_bytes()
    return tuple(sorted({"'sha256-" + base64.b64encode(hashlib.sha256(m.group(1)).digest()).decode() + "'"
                         for m in _INLINE_SCRIPT.finditer(data)}))


@require_safe
def docs_page(request, path: str = ""):
    root = site_root()
    if not is_built(root):
        return render(request, "web/docs_missing.html", status=503)
    target = resolve(root, path)
    if target is None:
        raise Http404(f"no documentation page at /docs/{path}")
    if target.is_dir():
        if path and not path.endswith("/"):
            return HttpResponseRedirect(request.path + "/")
        target = target / "index.html"
        if not target.is_file():
            raise Http404(f"no documentation page at /docs/{path}")
    if not target.is_file():
        raise Http404(f"no documentation page at /docs/{path}")
    ctype, encoding = mimetypes.guess_type(target.name)
    if encoding:  # sitemap.xml.gz: a file to download, not to be decoded by the browser
        ctype = "application/octet-stream"
    response = FileResponse(target.open("rb"), content_type=ctype or "application/octet-stream")
    if target.suffix == ".html":
        hashes = _script_hashes(str(target), target.stat().st_mtime_ns)
        if hashes:
            response.csp_allow = {"script-src": hashes}
    response["Cache-Control"] = "public, max-age=300"
    return response

