"""The API docs page: django-ninja's bundled Swagger UI, served by this server (works offline).

django-ninja ships Swagger UI's files, but its page loads them from a CDN unless ``ninja`` is an
installed app; this page loads them from ``/api/docs/assets/`` instead, read from the ninja
package, so nothing changes in the settings and no request leaves the site.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

import ninja
from django.http import FileResponse, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils.html import escape, json_script
from ninja.openapi.docs import Swagger

ASSET_DIR = Path(ninja.__file__).resolve().parent / "static" / "ninja"
ASSETS = ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-init.js", "favicon.png", "favicon.svg",
          "swagger-ui.css.map", "swagger-ui-bundle.js.map")

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="{assets}swagger-ui.css">
<link rel="icon" type="image/png" href="{assets}favicon.png">
</head>
<body data-csrf-token="{csrf}" data-api-csrf="true">
{settings}
<div id="swagger-ui"></div>
<script src="{assets}swagger-ui-bundle.js"></script>
<script src="{assets}swagger-ui-init.js"></script>
</body>
</html>
"""


class LocalSwagger(Swagger):
    """Swagger UI whose scripts and styles come from this server."""

    def render_page(self, request: HttpRequest, api, **kwargs) -> HttpResponse:
        cfg = dict(self.settings, url=self.get_openapi_url(api, kwargs))
        assets = reverse(f"{api.urls_namespace}:docs-asset", args=["x"])[:-1]
        html = PAGE.format(title=escape(api.title), assets=escape(assets), csrf=escape(get_token(request)),
                           settings=json_script(cfg, "swagger-settings"))
        return HttpResponse(html, content_type="text/html; charset=utf-8")


def docs_asset(request: HttpRequest, name: str) -> HttpResponse:
    """One of Swagger UI's files (a fixed list; cached for a day)."""
    from .errors import ApiError

    if name not in ASSETS or not (ASSET_DIR / name).is_file():
        raise ApiError("not_found", detail=f"docs asset {name!r} not found")
    ctype = mimetypes.guess_type(name)[0] or "application/json"
    resp = FileResponse(open(ASSET_DIR / name, "rb"), content_type=ctype)
    resp["Cache-Control"] = "public, max-age=86400"
    return resp
