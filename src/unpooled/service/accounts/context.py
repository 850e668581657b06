"""The navigation's links by role: each page's header shows a signed-in user only what their role may use."""

from __future__ import annotations

from django.utils.functional import SimpleLazyObject

from .actions import can_annotate, is_organiser, team_of


def _nav(user) -> dict[str, bool]:
    """What the header links to.  Anonymous visitors see Submit and Annotate (both ask them to sign in); a
    signed-in user sees Submit only with a team or as an organiser, Annotate only as an annotator or organiser,
    and the console only as an organiser -- the same tests the pages themselves make.  The role is read from the
    profile the session's user was loaded with (no query of its own)."""
    if not user.is_authenticated:
        return {"submit": True, "annotate": True, "console": False}
    organiser = is_organiser(user)
    return {"submit": organiser or team_of(user) is not None, "annotate": can_annotate(user), "console": organiser}


def nav(request) -> dict:
    return {"nav": SimpleLazyObject(lambda: _nav(request.user))}
