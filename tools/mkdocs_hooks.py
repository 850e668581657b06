"""MkDocs hooks of the documentation site (``mkdocs.yml``): the pages generated at build time, and formulas.

* ``reference/cli.md`` from the ``unpooled`` parser (:func:`unpooled.cli.reference.cli_reference`);
* ``reference/api.md`` from the OpenAPI schema the service serves (:mod:`unpooled.service.api.reference`);
* ``security.md`` from the repository's ``SECURITY.md`` (one text, two places);
* formulas written ``$...$`` / ``$$...$$`` (kept apart by ``pymdownx.arithmatex``) become MathML when the page is
  built, so that a browser shows them with no script and nothing fetched (the site works offline and under the
  service's Content-Security-Policy).

Everything here runs offline: Django is set up on a throw-away data directory, without a database connection.
"""

from __future__ import annotations

import html
import os
import re
import tempfile
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
_scratch: tempfile.TemporaryDirectory | None = None


def _django() -> None:
    """Set Django up (no migration, no database access) so that the API's schema can be built."""
    global _scratch
    from django.conf import settings

    if settings.configured:
        return
    # a throw-away data directory: the build reads no data and leaves none (the settings make a secret key and an
    # empty SQLite file in the data directory they are given, and ./dev up builds beside a running server)
    _scratch = tempfile.TemporaryDirectory(prefix="unpooled-docs-")
    os.environ["UNPOOLED_DATA_DIR"] = _scratch.name
    os.environ.pop("UNPOOLED_CACHE", None)
    from unpooled.service.config.bootstrap import setup_django

    setup_django(migrate=False)


def _generated(config) -> dict[str, str]:
    from unpooled.cli.reference import cli_reference

    _django()
    from unpooled.service.api.reference import api_reference, served_schema

    security = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    return {
        "reference/cli.md": cli_reference(),
        "reference/api.md": api_reference(served_schema()),
        "security.md": security,
    }


def on_files(files, config):
    for path, text in _generated(config).items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=text))
    return files


_MATH = re.compile(r'<(span|div) class="arithmatex">\\[(\[](.*?)\\[)\]]</\1>', re.S)


def _mathml(match: re.Match) -> str:
    from latex2mathml.converter import convert

    tag, latex = match.group(1), html.unescape(match.group(2)).strip()
    display = "block" if tag == "div" else "inline"
    math = convert(latex, display=display)
    return f'<div class="math">{math}</div>' if display == "block" else math


def on_page_content(content, page, config, files):
    return _MATH.sub(_mathml, content)
