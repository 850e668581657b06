"""Accounts: sign-up, roles, API tokens, quotas and who may see what.

``check_*`` functions validate and authorise and raise :class:`AccountError` with a
message that says what is wrong; ``do_*`` functions write.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from unpooled.core.errors import UnpooledError
from unpooled.service.submissions.models import Submission, Team

from .models import ApiToken, Profile, Role

TOKEN_PREFIX = "upt_"


class AccountError(UnpooledError):
    """A request about accounts, teams, tokens or quotas that cannot be granted; ``status`` is the HTTP status."""

    def __init__(self, message: str, *, code: str = "account", status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


# ---------------------------------------------------------------------------- roles

def role_of(user) -> str | None:
    """The user's role; ``None`` for anonymous users. Staff without a profile are organisers."""
    if user is None or not user.is_authenticated:
        return None
    prof = getattr(user, "_unpooled_profile", None)
    if prof is None:
        prof = Profile.objects.filter(user=user).select_related("team").first()
        user._unpooled_profile = prof or False
    if prof:
        if prof.role != Role.ORGANISER and (user.is_superuser or user.is_staff):
            return Role.ORGANISER
        return prof.role
    return Role.ORGANISER if (user.is_superuser or user.is_staff) else Role.ANNOTATOR


def is_organiser(user) -> bool:
    return role_of(user) == Role.ORGANISER


def can_annotate(user) -> bool:
    return role_of(user) in (Role.ANNOTATOR, Role.ORGANISER)


def team_of(user) -> Team | None:
    if user is None or not user.is_authenticated:
        return None
    role_of(user)
    prof = user._unpooled_profile
    return prof.team if prof else None


# ---------------------------------------------------------------------------- sign-up

def check_team_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise AccountError("team: a team name is required", code="team_required")
    if len(name) > 100:
        raise AccountError("team: at most 100 characters", code="team_invalid")
    return name


@transaction.atomic
def do_sign_up(username: str, password: str, *, email: str = "", role: str = Role.SUBMITTER, team: str = "",
               invite_code: str = "", affiliation: str = ""):
    """Create a user with a profile. A submitter names a new team, or joins an existing one with its invite code."""
    User = get_user_model()
    if role not in (Role.SUBMITTER, Role.ANNOTATOR):
        raise AccountError(f"role: expected submitter or annotator, got {role!r} (organisers are made by an organiser)",
                           code="role_invalid")
    if User.objects.filter(username__iexact=username).exists():
        raise AccountError(f"username: {username!r} is taken", code="username_taken", status=409)
    the_team = None
    if role == Role.SUBMITTER:
        name = check_team_name(team)
        the_team = Team.objects.filter(name__iexact=name).first()
        if the_team is None:
            the_team = Team.objects.create(name=name)
        elif not invite_code or not secrets.compare_digest(invite_code.strip(), the_team.invite_code):
            raise AccountError(f"team: {name!r} exists; to join it, give its invite code (a member finds it on their "
                               "account page)", code="team_exists", status=409)
    user = User.objects.create_user(username=username, email=email, password=password)
    Profile.objects.create(user=user, role=role, team=the_team, affiliation=affiliation)
    return user


def do_set_role(user, role: str, *, team: Team | None = None):
    """Organisers change roles (an organiser is also staff, for the admin)."""
    if role not in Role.values:
        raise AccountError(f"role: expected one of {', '.join(Role.values)}, got {role!r}", code="role_invalid")
    prof, _ = Profile.objects.get_or_create(user=user, defaults={"role": role, "team": team})
    prof.role = role
    if team is not None:
        prof.team = team
    prof.save()
    user.is_staff = role == Role.ORGANISER or user.is_superuser
    user.save(update_fields=["is_staff"])
    user.__dict__.pop("_unpooled_profile", None)
    return prof


# ---------------------------------------------------------------------------- tokens

def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def do_issue_token(user, name: str = "api") -> tuple[ApiToken, str]:
    """A new token for the user's team; returns the row and the token itself (shown once)."""
    team = team_of(user)
    if team is None:
        raise AccountError("only members of a team can make API tokens (sign up as a submitter)", code="no_team",
                           status=403)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(30)
    tok = ApiToken.objects.create(team=team, user=user, name=(name or "api").strip()[:100] or "api",
                                  prefix=raw[:12], digest=_digest(raw))
    return tok, raw


def do_revoke_token(user, token_id: int) -> ApiToken:
    tok = ApiToken.objects.filter(pk=token_id).select_related("team").first()
    if tok is None or (tok.team != team_of(user) and not is_organiser(user)):
        raise AccountError(f"token {token_id}: no such token of your team", code="not_found", status=404)
    if tok.revoked is None:
        tok.revoked = timezone.now()
        tok.save(update_fields=["revoked"])
    return tok


def authenticate_token(raw: str) -> ApiToken | None:
    """The live token for a bearer string, or ``None``. Records its last use (at most once a minute)."""
    if not raw or not raw.startswith(TOKEN_PREFIX):
        return None
    tok = (ApiToken.objects.filter(digest=_digest(raw), revoked__isnull=True)
           .select_related("team", "user").first())
    if tok is None or not tok.user.is_active:
        return None
    now = timezone.now()
    if tok.last_used is None or now - tok.last_used > timedelta(minutes=1):
        ApiToken.objects.filter(pk=tok.pk).update(last_used=now)
    return tok


# ---------------------------------------------------------------------------- quotas

# the quota itself belongs to the submissions app (a team's accepted submissions); re-exported here
from unpooled.service.submissions.quota import Quota, QuotaError, check_quota, quota  # noqa: E402,F401


def do_set_quota(team: Team, *, per_day: int | None, total: int | None) -> Team:
    for name, v in (("per_day", per_day), ("total", total)):
        if v is not None and (not isinstance(v, int) or v < 0):
            raise AccountError(f"{name}: expected a non-negative integer or nothing, got {v!r}", code="quota_invalid")
    team.quota_per_day, team.quota_total = per_day, total
    team.save(update_fields=["quota_per_day", "quota_total"])
    return team


# ---------------------------------------------------------------------------- visibility

def visible_submissions(user, qs: QuerySet | None = None) -> QuerySet:
    """Public submissions, plus the user's team's private ones; organisers see everything."""
    qs = Submission.objects.all() if qs is None else qs
    if is_organiser(user):
        return qs
    team = team_of(user)
    cond = Q(visibility=Submission.Visibility.PUBLIC)
    if team is not None:
        cond |= Q(team=team)
    return qs.filter(cond)


def can_view(user, sub: Submission) -> bool:
    return sub.visibility == Submission.Visibility.PUBLIC or is_organiser(user) or (
        team_of(user) is not None and team_of(user).pk == sub.team_id)


def can_manage(user, sub: Submission) -> bool:
    """Change visibility, see the labelled sample: the submitting team and organisers."""
    return is_organiser(user) or (team_of(user) is not None and team_of(user).pk == sub.team_id)


__all__ = ["AccountError", "IntegrityError", "Role", "authenticate_token", "can_annotate", "can_manage", "can_view",
           "check_quota", "do_issue_token", "do_revoke_token", "do_set_quota", "do_set_role", "do_sign_up",
           "is_organiser", "quota", "role_of", "team_of", "visible_submissions"]
