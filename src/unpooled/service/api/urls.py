"""URLs under ``/api/``: the ninja endpoints, the docs assets, and a JSON 404 for everything else.

Every view here answers errors as JSON ``{code, message, diagnostics}``: Django-level
responses (405 method not allowed, an oversized request) and crashes are converted too.
"""

from __future__ import annotations

import functools
import logging

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import URLPattern, path, re_path, reverse
from django.views.decorators.csrf import csrf_exempt

from .api import api
from .docs import docs_asset
from .errors import ApiError

log = logging.getLogger(__name__)

#: room for the multipart envelope and form fields around the largest accepted file
ENVELOPE_BYTES = 1 << 20


def error_response(err: ApiError) -> HttpResponse:
    resp = JsonResponse(err.body(), status=err.status)
    for k, v in err.headers.items():
        resp[k] = v
    return resp


def _too_large(request: HttpRequest) -> ApiError | None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return ApiError("invalid_request", detail="the Content-Length header is not a number")
    limit = settings.LIMITS.max_bytes
    if length > limit + ENVELOPE_BYTES:
        return ApiError("too_large", limit=limit)
    return None


def json_errors(view):
    """Answer before reading an oversized body; turn non-JSON error responses and crashes into JSON errors."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        err = _too_large(request)
        if err is not None:
            return error_response(err)
        try:
            resp = view(request, *args, **kwargs)
        except ApiError as exc:
            return error_response(exc)
        except Http404 as exc:
            return error_response(ApiError("not_found", detail=str(exc) or f"{request.path}: not found"))
        except Exception as exc:  # noqa: BLE001 - the client gets JSON, the log the traceback
            log.exception("API %s %s failed", request.method, request.path)
            return error_response(ApiError("internal", detail=type(exc).__name__))
        if resp.status_code >= 400 and not resp.get("Content-Type", "").startswith("application/json"):
            if resp.status_code == 405:
                allowed = resp.get("Allow", "")
                err = ApiError("method_not_allowed", method=request.method, path=request.path, allowed=allowed)
                out = error_response(err)
                out["Allow"] = allowed
                return out
            detail = resp.content.decode("utf-8", "replace")[:500] if hasattr(resp, "content") else ""
            code = {401: "unauthenticated", 403: "forbidden", 404: "not_found", 413: "too_large"}.get(
                resp.status_code, "internal" if resp.status_code >= 500 else "invalid_request")
            return error_response(ApiError(code, status=resp.status_code,
                                           message=f"HTTP {resp.status_code}: {detail or resp.reason_phrase}"))
        return resp

    return wrapped


@csrf_exempt
def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    return error_response(ApiError("not_found", detail=f"{request.path}: no such API endpoint (see /api/docs)"))


@csrf_exempt
def index(request: HttpRequest) -> HttpResponse:
    """``/api/``: where the docs and the schema are."""
    return JsonResponse({"name": api.title, "version": api.version,
                         "docs": request.build_absolute_uri(reverse("api:openapi-view")),
                         "openapi": request.build_absolute_uri(reverse("api:openapi-json"))})


def _wrap(patterns):
    out = []
    for p in patterns:
        if isinstance(p, URLPattern):
            view = index if p.name == "api-root" else p.callback
            p = URLPattern(p.pattern, json_errors(view), p.default_args, p.name)
        out.append(p)
    return out


_patterns, _app, app_name = api.urls
urlpatterns = [
    path("docs/assets/<str:name>", json_errors(docs_asset), name="docs-asset"),
    *_wrap(_patterns),
    re_path(r"^(?P<rest>[\s\S]*)$", json_errors(not_found)),  # any path, newlines included
]

__all__ = ["api", "urlpatterns"]
