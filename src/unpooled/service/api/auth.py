"""Who is calling: a team's API token (``Authorization: Bearer upt_...``), the browser's session, or nobody.

A token acts as the user who made it (:class:`~unpooled.service.accounts.models.ApiToken`) and
submits for the token's team. A malformed or unknown token is an error (401), never a silent
fall-back to anonymous access. A signed-in browser must send Django's CSRF token with writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from unpooled.service.accounts import actions as accounts
from unpooled.service.submissions.models import Submission

from .errors import ApiError

SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")


@dataclass
class Caller:
    """The authenticated (or anonymous) caller of one request."""

    user: Any
    token: Any = None  # ApiToken
    _team: Any = field(default=None, repr=False)

    @property
    def authenticated(self) -> bool:
        return bool(self.user is not None and self.user.is_authenticated)

    @property
    def via(self) -> str:
        return "token" if self.token is not None else "session" if self.authenticated else "anonymous"

    @property
    def team(self):
        """The team the caller submits for: the token's team, else the user's."""
        if self._team is None:
            self._team = self.token.team if self.token is not None else (accounts.team_of(self.user) or False)
        return self._team or None

    @property
    def role(self) -> str | None:
        return accounts.role_of(self.user)

    @property
    def organiser(self) -> bool:
        return accounts.is_organiser(self.user)

    def visible(self, qs=None):
        return accounts.visible_submissions(self.user, qs)

    def can_view(self, sub: Submission) -> bool:
        return accounts.can_view(self.user, sub) or self._own(sub)

    def can_manage(self, sub: Submission) -> bool:
        return accounts.can_manage(self.user, sub) or self._own(sub)

    def _own(self, sub: Submission) -> bool:
        return self.team is not None and self.team.pk == sub.team_id


def caller(request: HttpRequest) -> Caller:
    """The request's caller (set by the authentication callbacks; anonymous when none ran)."""
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, Caller) else Caller(AnonymousUser())


class TokenAuth(HttpBearer):
    """``Authorization: Bearer <token>`` with a team's API token."""

    def __call__(self, request: HttpRequest) -> Caller | None:
        value = request.headers.get(self.header)
        if not value:
            return None
        scheme, _, raw = value.strip().partition(" ")
        if scheme.lower() != self.openapi_scheme:
            raise ApiError("invalid_authorization", scheme=scheme, headers={"WWW-Authenticate": "Bearer"})
        return self.authenticate(request, raw.strip())

    def authenticate(self, request: HttpRequest, token: str) -> Caller:
        tok = accounts.authenticate_token(token)
        if tok is None:
            raise ApiError("invalid_token", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        request.user = tok.user
        return Caller(tok.user, tok)


class SessionAuth(APIKeyCookie):
    """The browser's Django session (the docs page, the web pages' scripts); writes need the CSRF token."""

    param_name = settings.SESSION_COOKIE_NAME

    def __init__(self) -> None:
        super().__init__(csrf=False)  # checked below, only for a signed-in user's writes

    def __call__(self, request: HttpRequest) -> Caller | None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        return self.authenticate(request, request.COOKIES.get(self.param_name))

    def authenticate(self, request: HttpRequest, key: str | None) -> Caller:
        if request.method not in SAFE_METHODS and check_csrf(request) is not None:
            raise ApiError("csrf_failed")
        return Caller(request.user)


class AnonymousAuth:
    """Lets a request without credentials through as anonymous (reading public data)."""

    def __call__(self, request: HttpRequest) -> Caller:
        return Caller(AnonymousUser())


#: endpoints anyone may call (public data; more for a signed-in caller)
OPTIONAL = [TokenAuth(), SessionAuth(), AnonymousAuth()]
#: endpoints that need a caller
REQUIRED = [TokenAuth(), SessionAuth()]
#: OpenAPI: anonymous access is allowed too (an empty security requirement)
OPTIONAL_EXTRA = {"security": [{}]}
