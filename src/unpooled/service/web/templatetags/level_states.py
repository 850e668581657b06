"""``{{ subs|with_levels }}``: the submissions of a list with each level's state set on them (``levels``,
``stage_summary``: :func:`unpooled.service.evaluations.status.attach_level_states`, two queries for the list), for
the lists rendered by apps below the evaluations (the account page)."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def with_levels(subs) -> list:
    from unpooled.service.evaluations.status import attach_level_states

    return attach_level_states(subs)
