"""The REST API object: routers, error handlers and the offline docs page.

Mounted at ``/api/`` (``config/urls.py``); the schema is ``/api/openapi.json``, the docs page
``/api/docs`` (Swagger UI served from this server, no CDN).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import (
    BadRequest,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import Http404, HttpRequest, HttpResponse, UnreadablePostError
from django.http.multipartparser import MultiPartParserError
from ninja import NinjaAPI
from ninja.parser import Parser
from ninja.errors import AuthenticationError, HttpError, ValidationError

from unpooled import __version__
from unpooled.core import json_text
from unpooled.service.accounts.actions import AccountError
from unpooled.service.submissions.quota import QuotaError
from unpooled.service.submissions.storage import StorageFull, discard_received, storage_full
from unpooled.service.corpora.actions import ActionError

from .docs import LocalSwagger
from .errors import ERRORS, ApiError, request_diagnostics

log = logging.getLogger(__name__)

DESCRIPTION = """\
On-demand evaluation of knowledge base population: corpora, submissions, their evaluation
progress and scores, leaderboards and the label pool.

**Authentication.** Send a team's API token as `Authorization: Bearer upt_...` (make one on
your account page, `/accounts/`). A signed-in browser uses its session instead (writes then need
the `X-CSRFToken` header). Without credentials you can read public data.

**Errors.** Every error is JSON `{code, message, diagnostics[]}` with a stable `code` and the
HTTP status: 400 invalid request, 401 no or invalid token, 403 not allowed, 404 not found,
409 conflict (`duplicate_run`: a run name taken; `conflict`: another upload stored the same
run at the same moment, upload again), 413 too large, 422 a rejected file (each diagnostic
says where: `path`, `line`, `col`, `field`, `code`, `message`, `help`), 429 quota used up
(`quota_day`, `quota_total`) or too many rejected or waiting uploads (`rate_limited`), 507 no disk
space left on the server (`storage_full`: nothing was stored; try again later).
A rejected file stores nothing. A 500 says only `internal` or `upload_failed`; the server's
log has the details.

**Submitting.** `POST /api/submissions` (multipart) answers 202 with an upload id; poll
`GET /api/uploads/{id}` (or pass `?wait=SECONDS`) until it is `accepted` or `rejected`.
The server waits at most a few seconds per request (`UNPOOLED_UPLOAD_WAIT_SECONDS`, 5), and
only while few other requests wait: an unfinished upload answers with `Retry-After`; poll
again. The same file sent again by your team answers 200 with your earlier submission.
A team may have 20 uploads rejected a day and 3 waiting at once (the organiser's settings).
From a shell: `unpooled submit FILE --server URL --token T --corpus NAME --wait`.
"""

_BY_STATUS = {400: "invalid_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
              405: "method_not_allowed", 409: "conflict", 413: "too_large", 422: "invalid_request",
              429: "quota_day"}


def _error_for_status(status: int, detail: str) -> ApiError:
    code = _BY_STATUS.get(status, "internal" if status >= 500 else "invalid_request")
    return ApiError(code, status=status, message=detail)


_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean",
               type(None): "null"}


class JsonObjects(Parser):
    """Request bodies are JSON objects.  Ninja takes any JSON value, and a patch whose fields are all optional read
    ``true`` or ``[]`` as no change (schemathesis: ``PATCH /api/submissions/{pk}`` with the body ``true`` was
    answered 200).  What is wrong is kept on the request for the error's message (ninja's own says only "Cannot
    parse request body")."""

    def parse_body(self, request):
        try:
            data = json_text.loads(request.body)
        except ValueError as exc:  # json_text: every way the body is not one JSON value is a JSONDecodeError
            request.unpooled_body_error = f"body: cannot parse it as JSON ({exc})"
            raise
        if not isinstance(data, dict):
            request.unpooled_body_error = f"body: expected a JSON object, got {_JSON_TYPES.get(type(data), 'a value')}"
            raise ValueError(request.unpooled_body_error)
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS  # as a form's: each unknown field would be a diagnostic
        if limit and len(data) > limit:
            request.unpooled_body_error = (f"body: {len(data):,} fields, more than the {limit:,} a request may have "
                                           "(this endpoint takes a few: see /api/docs)")
            raise ValueError(request.unpooled_body_error)
        return data


class UnpooledAPI(NinjaAPI):
    _schemas: dict

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        """Built once per prefix (it takes a noticeable fraction of a second and never changes while running)."""
        if path_prefix is None:
            path_prefix = self.get_root_path(path_params or {})
        cache = self.__dict__.setdefault("_schemas", {})
        if path_prefix not in cache:
            cache[path_prefix] = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        return cache[path_prefix]

    def error_response(self, request: HttpRequest, err: ApiError) -> HttpResponse:
        resp = self.create_response(request, err.body(), status=err.status)
        for k, v in err.headers.items():
            resp[k] = v
        return resp


api = UnpooledAPI(
    title="unpooled API",
    version=__version__,
    description=DESCRIPTION,
    docs=LocalSwagger(settings={"validatorUrl": None, "persistAuthorization": True}),
    docs_url="/docs",
    openapi_url="/openapi.json",
    urls_namespace="api",
    parser=JsonObjects(),
)


@api.exception_handler(ApiError)
def _api_error(request, exc: ApiError):
    return api.error_response(request, exc)


@api.exception_handler(ValidationError)
def _validation_error(request, exc: ValidationError):
    diags = request_diagnostics(exc.errors)
    summary = "; ".join(f"{d['path']}{'.' + d['field'] if d['field'] else ''}: {d['message']}" for d in diags[:5])
    if len(exc.errors) > 5:
        summary += f"; and {len(exc.errors) - 5} more"
    return api.error_response(request, ApiError("invalid_request", diagnostics=diags, detail=summary))


@api.exception_handler(AuthenticationError)
def _unauthenticated(request, exc):
    return api.error_response(request, ApiError("unauthenticated", headers={"WWW-Authenticate": "Bearer"}))


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    return api.error_response(request, _error_for_status(exc.status_code,
                                                         getattr(request, "unpooled_body_error", None) or str(exc)))


@api.exception_handler(Http404)
def _not_found(request, exc):
    return api.error_response(request, ApiError("not_found", detail=str(exc) or f"{request.path}: not found"))


@api.exception_handler(QuotaError)
@api.exception_handler(AccountError)
def _account_error(request, exc: AccountError | QuotaError):
    code = exc.code if exc.code in ERRORS else _BY_STATUS.get(exc.status, "invalid_request")
    return api.error_response(request, ApiError(code, status=exc.status, detail=str(exc)))


@api.exception_handler(ActionError)
def _action_error(request, exc: ActionError):
    return api.error_response(request, ApiError("invalid_request", detail=str(exc)))


@api.exception_handler(RequestDataTooBig)
def _too_big(request, exc):
    return api.error_response(request, ApiError("too_large", limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE))


@api.exception_handler(TooManyFieldsSent)
@api.exception_handler(TooManyFilesSent)
def _too_many_fields(request, exc):
    return api.error_response(request, ApiError("invalid_request", detail=str(exc)))


@api.exception_handler(StorageFull)
def _storage_full(request, exc: StorageFull):
    return api.error_response(request, ApiError("storage_full", detail=str(exc)))


@api.exception_handler(MultiPartParserError)
@api.exception_handler(UnreadablePostError)
def _bad_multipart(request, exc):
    """A body that is not the multipart it says (no boundary, cut short): the client's error, never a 500 (a disk
    that filled while the body was received: 507)."""
    if storage_full(exc):
        discard_received(request)
        return _storage_full(request, StorageFull())
    ctype = request.META.get("CONTENT_TYPE", "")[:100]
    return api.error_response(request, ApiError(
        "invalid_request", detail=f"the request body cannot be read as {ctype!r}: send the fields and the file as "
                                  "multipart/form-data with a boundary (curl -F, or any HTTP library's multipart "
                                  "encoder)"))


@api.exception_handler(BadRequest)
@api.exception_handler(SuspiciousOperation)
def _bad_request(request, exc):
    log.warning("API %s %s: bad request (%s)", request.method, request.path, type(exc).__name__)
    return api.error_response(request, ApiError("invalid_request", detail=f"the request was refused "
                                                                          f"({type(exc).__name__})"))


@api.exception_handler(Exception)
def _internal(request, exc: Exception):
    if storage_full(exc):  # the disk filled while the request body was received (Django's temporary file)
        log.warning("API %s %s: %s", request.method, request.path, exc)
        discard_received(request)
        return _storage_full(request, StorageFull())
    log.exception("API %s %s failed", request.method, request.path)
    return api.error_response(request, ApiError("internal", detail=type(exc).__name__))


from . import routes  # noqa: E402  (registers the endpoints)

api.add_router("/", routes.router)
