"""Requests no view should see.

A NUL character (U+0000) in a URL's path or query string reached the database in any lookup by name or search
(``/api/corpora/a%00b``, ``/corpora/x/?q=%00``): PostgreSQL refuses NUL in text, so each answered 500. No name,
search or parameter of the service contains one, so such a request is refused here with 400 (the API's JSON
error under ``/api/``). A session cookie holding one (a cookie's ``\\000`` escape) is dropped: the request is
anonymous. Form fields and JSON bodies are checked by their forms and schemas (Django's form fields refuse NUL;
the API's ``Text`` fields too), so the body is never read here.

A body larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (or one of unknown length, sent in chunks) is refused with 413
(411) on every address but the two that take a submission file (:data:`UPLOAD_URLS`), before the CSRF check reads
it: Django writes a form's attached files to disk as it receives them, so any page took gigabytes to the upload
folder from an anonymous client.  ``deploy/nginx.conf`` sets the same limits in front.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import TooManyFieldsSent
from django.http import HttpRequest, HttpResponse

NUL = "\x00"

#: the URL names of the only addresses that receive a file: the upload page and the API's submission upload
UPLOAD_URLS = ("web:upload", "api:submission_create")


class RefuseNulMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = None
        try:
            if NUL in request.path:
                where = "the URL's path"
            elif any(NUL in k or any(NUL in v for v in vs) for k, vs in request.GET.lists()):
                where = "the query string"
        except TooManyFieldsSent:  # read here first: under /api/ it was Django's HTML page, not the API's JSON
            return refused(request, f"the query string has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} "
                                    "parameters")
        if where is not None:
            return refused(request, f"{where} contains a NUL character (%00), which no name, search or parameter "
                                    "of this service has")
        key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
        if key is not None and NUL in key:
            del request.COOKIES[settings.SESSION_COOKIE_NAME]
        return self.get_response(request)


class RefuseLargeBodyMiddleware:
    """413 for a body above ``DATA_UPLOAD_MAX_MEMORY_SIZE`` and 411 for a chunked one of unknown length, except on
    :data:`UPLOAD_URLS` (their own limit is ``UNPOOLED_MAX_UPLOAD_BYTES``); the body is not read."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response
        self._uploads: frozenset[str] | None = None

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        try:
            size = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0  # Django reads a malformed length as none
        chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
        if (size > limit or chunked) and request.path not in self.uploads():
            if chunked:
                return refused(request, "the request body has no Content-Length (sent in chunks): send its length",
                               411)
            return refused(request, f"the request body is larger than {limit:,} bytes, the limit of every address "
                                    "but the submission uploads", 413, "too_large")
        return self.get_response(request)

    def uploads(self) -> frozenset[str]:
        if self._uploads is None:
            from django.urls import reverse

            self._uploads = frozenset(reverse(name) for name in UPLOAD_URLS)
        return self._uploads


def refused(request: HttpRequest, message: str, status: int = 400, code: str = "invalid_request") -> HttpResponse:
    """The refusal of a request no view should see: the API's JSON error under ``/api/``, plain text elsewhere."""
    if request.path.startswith("/api/"):
        from unpooled.service.api.errors import ApiError
        from unpooled.service.api.urls import error_response

        return error_response(ApiError(code, status=status, message=message))
    return HttpResponse(f"Bad request: {message}.\n", status=status, content_type="text/plain; charset=utf-8")
