"""Security headers every response carries: a Content-Security-Policy with no inline script.

The pages' JavaScript and style sheets are static files of this site; the policy lets nothing else run:
no inline ``<script>``, no ``javascript:`` URL, no event-handler attribute, no script or style from
another origin, no plugin, no ``<base>``; forms post to this site only; no other site may frame a page.
Inline ``style=""`` attributes stay allowed (``style-src-attr``: bar widths); they cannot run script.

A view may widen one response, for what it needs, by setting ``response.csp_allow`` to a mapping of
directive -> sources to add (the MTurk task pages: ``frame-ancestors`` and ``form-action`` naming
Mechanical Turk's two hosts).
"""

from __future__ import annotations

POLICY: dict[str, tuple[str, ...]] = {
    "default-src": ("'self'",),
    "script-src": ("'self'",),
    "style-src": ("'self'",),
    "style-src-attr": ("'unsafe-inline'",),
    "img-src": ("'self'", "data:"),
    "font-src": ("'self'",),
    "connect-src": ("'self'",),
    "object-src": ("'none'",),
    "base-uri": ("'none'",),
    "form-action": ("'self'",),
    "frame-ancestors": ("'none'",),
}


def policy(allow: dict | None = None) -> str:
    """The header's value: :data:`POLICY` plus the sources in ``allow`` (``'none'`` gives way to them)."""
    out = []
    for directive, sources in POLICY.items():
        extra = tuple((allow or {}).get(directive, ()))
        if extra:
            sources = tuple(s for s in sources if s != "'none'") + tuple(s for s in extra if s not in sources)
        out.append(f"{directive} {' '.join(sources)}")
    return "; ".join(out)


DEFAULT = policy()


class SecurityHeaders:
    """Middleware: set ``Content-Security-Policy`` on every response that has none."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            allow = getattr(response, "csp_allow", None)
            response["Content-Security-Policy"] = policy(allow) if allow else DEFAULT
        return response
