"""Requests no view should see.

A NUL character (U+0000) in a URL's path or query string reached the database in any lookup by name or search
(``/api/corpora/a%00b``, ``/corpora/x/?q=%00``): PostgreSQL refuses NUL in text, so each answered 500. No name,
search or parameter of the service contains one, so such a request is refused here with 400 (the API's JSON
error under ``/api/``). A session cookie holding one (a cookie's ``\\000`` escape) is dropped: the request is
anonymous. Form fields and JSON bodies are checked by their forms and schemas (Django's form fields refuse NUL;
the API's ``Text`` fields too), so the body is never read here.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

NUL = "\x00"


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
        except TooManyFieldsSent:
            if not request.path.startswith("/api/"):
                raise  # Django's own 400 page
            # the API answers every error as JSON: this one was Django's HTML page (more parameters than
            # DATA_UPLOAD_MAX_NUMBER_FIELDS are refused while the query string is read, here)
            return self._json(f"the query string has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} parameters")
        if where is not None:
            return self._refuse(request, where)
        key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
        if key is not None and NUL in key:
            del request.COOKIES[settings.SESSION_COOKIE_NAME]
        return self.get_response(request)

    @staticmethod
    def _refuse(request: HttpRequest, where: str) -> HttpResponse:
        message = f"{where} contains a NUL character (%00), which no name, search or parameter of this service has"
        if request.path.startswith("/api/"):
            return RefuseNulMiddleware._json(message)
        return HttpResponseBadRequest(f"Bad request: {message}.\n", content_type="text/plain; charset=utf-8")

    @staticmethod
    def _json(message: str) -> HttpResponse:
        from unpooled.service.api.errors import ApiError
        from unpooled.service.api.urls import error_response

        return error_response(ApiError("invalid_request", detail=message))
