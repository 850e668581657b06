"""API errors: one registry of stable codes, each with its HTTP status and message template.

Every error response of the API has the JSON body ``{"code", "message", "diagnostics"}``.
``diagnostics`` is a list in the located shape of :class:`unpooled.core.diagnostics.Diagnostic`
(``path, line, col, code, severity, message, field, text, help``): the errors of a rejected
file, or the fields of a request that failed validation (``path`` is then where the field
was sent: ``query``, ``form``, ``body``, ``path``, ``file``; ``line`` is 0).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Iterable

from unpooled.core.diagnostics import ERROR, WARNING, Diagnostic, Report

log = logging.getLogger(__name__)

#: code -> (HTTP status, message template). Codes are stable; templates take keyword fields.
ERRORS: dict[str, tuple[int, str]] = {
    "invalid_request": (400, "the request is invalid: {detail}"),
    "unauthenticated": (401, "authentication required: send 'Authorization: Bearer <token>' "
                             "(make a token on your account page, /accounts/)"),
    "invalid_token": (401, "the API token is not valid: it is unknown or revoked, or its user is inactive"),
    "invalid_authorization": (401, "the Authorization header must read 'Bearer <token>', got scheme {scheme!r}"),
    "forbidden": (403, "{detail}"),
    "csrf_failed": (403, "CSRF check failed: a signed-in browser must send the X-CSRFToken header "
                         "(API clients send a token instead of the session cookie)"),
    "no_team": (403, "only members of a team can submit: sign up as a submitter, or use a team's API token"),
    "team_not_approved": (403, "{detail}"),  # UNPOOLED_TEAM_APPROVAL: a new team waits for an organiser
    "not_found": (404, "{detail}"),
    "method_not_allowed": (405, "method {method} is not allowed on {path} (allowed: {allowed})"),
    "duplicate_run": (409, "{detail}"),
    "conflict": (409, "{detail}"),  # another upload stored the same run at the same time: upload again
    "period_closed": (409, "{detail}"),  # the corpus has had evaluation periods and none is open
    "too_large": (413, "the upload is larger than the limit of {limit:,} bytes"),
    "submission_rejected": (422, "{file}: rejected with {n_errors:,} error(s) and {n_warnings:,} warning(s); "
                                 "nothing was stored"),
    "quota_day": (429, "{detail}"),
    "quota_total": (429, "{detail}"),
    "storage_full": (507, "{detail}"),
    "rate_limited": (429, "{detail}"),  # too many rejected uploads in 24 hours, or too many waiting
    "upload_failed": (500, "validating {file} failed on the server: {detail}; nothing was stored"),
    "internal": (500, "internal error ({detail}); the server log has the details"),
}


class ApiError(Exception):
    """An error to answer with: ``code`` from :data:`ERRORS`, the message formatted from its template."""

    def __init__(self, code: str, *, diagnostics: Iterable[dict] = (), status: int | None = None,
                 headers: dict | None = None, message: str | None = None, **fields) -> None:
        if code not in ERRORS:
            raise KeyError(f"unknown API error code {code!r}")
        default_status, template = ERRORS[code]
        self.code = code
        self.status = status or default_status
        self.message = message if message is not None else template.format(**fields)
        self.diagnostics = list(diagnostics)
        self.headers = headers or {}
        super().__init__(self.message)

    def body(self) -> dict:
        return {"code": self.code, "message": self.message, "diagnostics": self.diagnostics}


def diagnostic(path: str, line: int, code: str, message: str, *, severity: str = ERROR, col: int = 0,
               field: str = "", text: str = "", help: str = "") -> dict:
    """One diagnostic as JSON, every key present (the shape of :class:`Diagnostic`)."""
    return asdict(Diagnostic(path, line, code, message, severity, col, field, text, help))


def report_diagnostics(report: dict, *, path: str | None = None) -> list[dict]:
    """The diagnostics of a :meth:`Report.to_dict` (errors first, then warnings, each by line)."""
    rep = Report.from_dict({**report, "path": path or report.get("path", "<input>")})
    rows = [d for d in rep.sorted() if d.severity == ERROR] + [d for d in rep.sorted() if d.severity == WARNING]
    return [asdict(d) for d in rows]


#: the most request diagnostics an error lists (the message counts the rest): a body of many wrong fields would
#: otherwise be answered with a diagnostic each
MAX_DIAGNOSTICS = 100


def request_diagnostics(errors: list[dict]) -> list[dict]:
    """Pydantic/ninja validation errors as diagnostics (the first :data:`MAX_DIAGNOSTICS`): ``path`` the source
    (query, form...), ``field`` the name."""
    out = []
    for e in errors[:MAX_DIAGNOSTICS]:
        loc = [str(x) for x in e.get("loc", ())]
        source = loc[0] if loc else "request"
        field = ".".join(loc[1:])
        out.append(diagnostic(source, 0, str(e.get("type", "invalid")), str(e.get("msg", "invalid value")),
                              field=field))
    return out


def rejection(outcome: dict, file_name: str) -> ApiError:
    """The error for an ingest outcome that stored nothing (the return value of ``ingest_upload``)."""
    report = outcome.get("report") or {}
    diags = report_diagnostics(report, path=file_name) if report.get("errors") or report.get("warnings") else []
    if outcome.get("error"):
        return classify_action_error(str(outcome["error"]), diagnostics=diags, file_name=file_name)
    return ApiError("submission_rejected", diagnostics=diags, file=file_name,
                    n_errors=int(report.get("n_errors", len(report.get("errors", [])))),
                    n_warnings=int(report.get("n_warnings", len(report.get("warnings", [])))))


#: message prefixes of action errors raised while storing (submissions/actions.py, accounts/actions.py)
_ACTION_MESSAGES = (
    ("quota: ", " has used all ", "quota_total"),
    ("quota: ", "", "quota_day"),
    ("team ", "already has a run named", "duplicate_run"),
    ("submission conflicts with one stored at the same time", "", "conflict"),
    ("unknown corpus", "", "not_found"),
    ("corpus ", "takes no submissions now", "period_closed"),
    ("the uploaded file is gone", "", "upload_failed"),
    ("the server has no disk space left", "", "storage_full"),
)


def classify_action_error(message: str, *, diagnostics: Iterable[dict] = (), file_name: str = "") -> ApiError:
    """An action's refusal (a message string from a background task) as an API error with the right status."""
    for prefix, contains, code in _ACTION_MESSAGES:
        if message.startswith(prefix) and contains in message:
            if code == "upload_failed":
                return ApiError(code, diagnostics=diagnostics, file=file_name or "the upload", detail=message)
            return ApiError(code, diagnostics=diagnostics, detail=message)
    return ApiError("invalid_request", diagnostics=diagnostics, detail=message)
