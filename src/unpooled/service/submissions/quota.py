"""Submission quotas: how many accepted submissions a team may make per 24 hours and in total."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from unpooled.core.errors import UnpooledError

from .models import Submission, Team


class QuotaError(UnpooledError):
    """The team may not submit now; ``code`` is the API's error code, ``status`` the HTTP status (429)."""

    def __init__(self, message: str, *, code: str = "quota", status: int = 429) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


@dataclass(frozen=True)
class Quota:
    per_day: int | None
    total: int | None
    used_day: int
    used_total: int

    @property
    def left_day(self) -> int | None:
        return None if self.per_day is None else max(0, self.per_day - self.used_day)

    @property
    def left_total(self) -> int | None:
        return None if self.total is None else max(0, self.total - self.used_total)

    def to_dict(self) -> dict:
        return {"per_day": self.per_day, "total": self.total, "used_day": self.used_day,
                "used_total": self.used_total, "left_day": self.left_day, "left_total": self.left_total}


def quota(team: Team, *, now=None) -> Quota:
    """The team's limits (its own, else the site's) and what it has used: accepted submissions (a rejected
    upload stores nothing, so it does not count)."""
    now = now or timezone.now()
    subs = Submission.objects.filter(team=team)
    per_day = team.quota_per_day if team.quota_per_day is not None else settings.QUOTA_PER_DAY
    total = team.quota_total if team.quota_total is not None else settings.QUOTA_TOTAL
    return Quota(per_day, total, subs.filter(created__gte=now - timedelta(days=1)).count(), subs.count())


def check_quota(team: Team, *, now=None) -> Quota:
    """Raise :class:`QuotaError` when the team may not submit now: it waits for an organiser's approval (403), or
    its quota is used up (429)."""
    if not team.approved:
        raise QuotaError(f"team {team.name!r} waits for an organiser's approval before it may submit (new teams are "
                         "approved on the organisers' Teams page)", code="team_not_approved", status=403)
    q = quota(team, now=now)
    if q.left_total == 0:
        raise QuotaError(f"quota: team {team.name!r} has used all {q.total} submissions it may make",
                         code="quota_total")
    if q.left_day == 0:
        raise QuotaError(f"quota: team {team.name!r} has made {q.used_day} submissions in the last 24 hours, "
                         f"its limit is {q.per_day}; try again later", code="quota_day")
    return q
