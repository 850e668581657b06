"""The site's error pages (``handler403``, ``handler404``, ``handler500`` in :mod:`unpooled.service.config.urls`):
styled like every page, with the navigation, what happened and where to go next.

The 500 page is rendered without the request: the error may come from the database, and the navigation's
``user`` would read the session from it again.
"""

from __future__ import annotations

from django.http import HttpResponseServerError
from django.shortcuts import render
from django.template.loader import render_to_string

#: what a forbidden or missing page most likely means, by the start of its path
_WHERE = (
    ("/organiser", "The organiser console is for organisers.", "an organiser"),
    ("/annotate", "Annotation pages are for annotators.", "an annotator"),
    ("/submissions/new", "Submitting is for submitters: members of a team.", "a submitter"),
    ("/accounts/invites", "Invites are made by organisers.", "an organiser"),
)


def _hint(path: str) -> tuple[str, str]:
    for prefix, text, role in _WHERE:
        if path.startswith(prefix):
            return text, role
    return "", ""


def _reason(exception) -> str:
    """The message a view gave its PermissionDenied / Http404 (none for Django's own resolver misses)."""
    if exception is None or not exception.args:
        return ""
    msg = exception.args[0]
    return msg if isinstance(msg, str) and not msg.startswith(("No ", "Page not found")) else ""


def forbidden(request, exception=None):
    hint, role = _hint(request.path)
    return render(request, "web/error.html", {
        "status": 403, "heading": "Not allowed", "reason": _reason(exception), "hint": hint, "role": role,
        "path": request.path}, status=403)


def csrf_failure(request, reason=""):
    """A form whose CSRF token is outdated (the user signed in again in another tab, or their session ended): what
    happened to what it sent, and what to do (Django's own page said "CSRF verification failed. Request aborted.")."""
    return render(request, "web/error.html", {
        "status": 403, "heading": "This form was out of date", "csrf": True, "path": request.path}, status=403)


def not_found(request, exception=None):
    reason = _reason(exception)
    return render(request, "web/error.html", {
        "status": 404, "heading": "Page not found", "reason": reason, "path": request.path}, status=404)


def server_error(request):
    return HttpResponseServerError(render_to_string("web/error.html", {
        "status": 500, "heading": "Something went wrong on the server", "path": request.path, "crashed": True}))
