"""Template filters of the organiser console."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def money(cents) -> str:
    """Cents as dollars: ``1234`` → ``$12.34``; ``None`` → ``–`` (no cap, undefined)."""
    if cents is None or cents == "":
        return "–"
    return f"${float(cents) / 100:,.2f}"


@register.filter
def pct(share) -> str:
    """A share as a percentage: ``0.456`` → ``45.6%``; ``None`` → ``–``."""
    if share is None or share == "":
        return "–"
    return f"{100 * float(share):.1f}%"


@register.filter
def css_width(x) -> str:
    """A percentage for a ``style`` attribute, with a dot whatever the locale."""
    return f"{float(x or 0):.1f}"
