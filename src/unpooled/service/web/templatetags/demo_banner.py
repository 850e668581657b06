"""``{% demo_banner %}``: the "loading the demo" banner of ``./dev up`` (nothing once the demo is loaded)."""

from __future__ import annotations

from django import template

from ..demo_progress import current_progress, public_view

register = template.Library()


@register.inclusion_tag("web/_demo_banner.html")
def demo_banner() -> dict:
    data = current_progress()
    return {"demo": public_view(data) if data else None}
