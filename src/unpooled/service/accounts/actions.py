"""Accounts: sign-up, roles, API tokens, quotas and who may see what.

``check_*`` functions validate and authorise and raise :class:`AccountError` with a
message that says what is wrong; ``do_*`` functions write.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from unpooled.core.errors import UnpooledError
from unpooled.service.submissions.models import Submission, Team

from .models import ApiToken, Invite, Profile, Role

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
    """The team the user submits for and whose private submissions they see: a submitter's or an organiser's.
    An annotator whose profile names a team (``unpooled user add --role annotator --team``, or a member made an
    annotator) has none here: that team is one they never label (:mod:`unpooled.service.annotation.leasing` reads
    the profile), not one they act for -- their session uploaded, changed and read its private runs while their
    API token was refused (security review N8)."""
    if user is None or not user.is_authenticated:
        return None
    role = role_of(user)
    prof = user._unpooled_profile
    return prof.team if prof and role in (Role.SUBMITTER, Role.ORGANISER) else None


# ---------------------------------------------------------------------------- sign-up

def check_team_name(name: str) -> str:
    """``name`` as stored (compatibility-normalised: a full-width "ＴｅａｍＡ" is "TeamA"), or an error."""
    import unicodedata

    name = unicodedata.normalize("NFKC", name or "").strip()
    if not name:
        raise AccountError("team: a team name is required", code="team_required")
    if len(name) > 100:
        raise AccountError("team: at most 100 characters", code="team_invalid")
    from unpooled.service.submissions.models import REFERENCE_TEAM, Team
    from unpooled.service.submissions.names import new_team_problem

    if name.casefold() == REFERENCE_TEAM.casefold():
        raise AccountError(f"team: {REFERENCE_TEAM!r} is reserved for the human reference", code="team_invalid")
    # a new team's name is checked (an existing one is joined with its invite code, whatever it looks like)
    why = None if Team.objects.filter(name__iexact=name).exists() else new_team_problem(name)
    if why:
        raise AccountError(why, code="team_invalid")
    return name


def _check_user_name(username: str, field: str) -> None:
    """No character readers would not see as written, one alphabet (:mod:`unpooled.service.submissions.names`)."""
    from unpooled.service.submissions.names import name_problem

    why = name_problem(username, field)
    if why:
        raise AccountError(why, code="username_invalid")


#: callables telling whether some corpus takes annotators without an organiser's invite; the annotation app
#: (above this one, which cannot import it) adds its own when it is ready
open_signup_checks: list = []


def open_signup() -> bool:
    """Whether some corpus takes annotators who signed up without an invite."""
    return any(check() for check in open_signup_checks)


INVITE_DAYS = 14


def check_invite(code: str) -> Invite:
    """The live invite of ``code`` (unused, not expired); raises :class:`AccountError`."""
    code = (code or "").strip()
    inv = Invite.objects.filter(code=code).first() if code else None
    if inv is None or not secrets.compare_digest(inv.code, code):
        raise AccountError("invite_code: no such invite (ask an organiser for one)", code="invite_invalid", status=403)
    if inv.used_by_id is not None:
        raise AccountError("invite_code: this invite was used already", code="invite_used", status=403)
    if inv.expires < timezone.now():
        raise AccountError(f"invite_code: this invite expired on {inv.expires:%Y-%m-%d}", code="invite_expired",
                           status=403)
    return inv


def check_sign_up(role: str, invite_code: str = "") -> None:
    """What the public sign-up page adds to :func:`do_sign_up`: an annotator account comes from an
    organiser's invite, unless some corpus takes annotators without one."""
    if role == Role.ANNOTATOR and not (invite_code or "").strip() and not open_signup():
        raise AccountError("invite_code: annotator accounts come from an organiser's invite; give its code",
                           code="invite_required", status=403)


#: what an annotator writes for "I belong to no team and work with none"
NO_TIES = frozenset({"none", "no", "no team", "no teams", "-"})
#: teams one declaration may name
MAX_TIES = 20


def check_ties(text: str | None) -> list[Team]:
    """The teams an annotator declares they belong to or work with (``ties``: names separated by commas, or
    "none"); they never label those teams' instances.  Every annotator account made by sign-up or given an invite
    declares them (security review N17: a team member's second account labelled their own team's items).  A name
    is matched as it looks (case, width and look-alike letters aside); one that no team has is refused, naming it."""
    from unpooled.service.submissions.names import skeleton

    text = (text or "").strip()
    if not text:
        raise AccountError("ties: name the teams you belong to or work with (a colleague's, a former employer's), "
                           "separated by commas, or write none", code="ties_required")
    if text.casefold() in NO_TIES:
        return []
    names = [n.strip() for n in text.split(",") if n.strip()]
    if len(names) > MAX_TIES:
        raise AccountError(f"ties: {len(names)} teams; at most {MAX_TIES} (an organiser can add more)",
                           code="ties_invalid")
    known: dict[str, list[int]] = {}
    for pk, name in Team.objects.values_list("pk", "name"):
        known.setdefault(skeleton(name), []).append(pk)
    found: set[int] = set()
    for name in names:
        got = known.get(skeleton(name))
        if not got:
            raise AccountError(f"ties: no team {name[:100]!r}; write team names as the leaderboard shows them "
                               "(leave out a team that has not registered, and tell an organiser)", code="ties_unknown")
        found.update(got)
    return list(Team.objects.filter(pk__in=found).order_by("pk"))


def _redeem(inv: Invite, user, prof: Profile, ties: list[Team]) -> None:
    """Mark ``inv`` used by ``user`` (once: a concurrent use of the same invite loses) and vouch for ``prof``,
    who never labels the invite's conflicts nor the teams they declared (``ties``)."""
    if not Invite.objects.filter(pk=inv.pk, used_by__isnull=True).update(used_by=user, used=timezone.now()):
        raise AccountError("invite_code: this invite was used already", code="invite_used", status=403)
    prof.invited = True
    prof.save(update_fields=["invited"])
    prof.conflicts.add(*inv.conflicts.all(), *ties)


@transaction.atomic
def do_sign_up(username: str, password: str, *, email: str = "", role: str = Role.SUBMITTER, team: str = "",
               invite_code: str = "", affiliation: str = "", ties: str = ""):
    """Create a user with a profile. A submitter names a new team, or joins an existing one with its invite code.

    An annotator declares the teams they belong to or work with (``ties``, :func:`check_ties`); with an
    organiser's invite code they may annotate every corpus (the invite's conflicts are copied to the profile);
    without one, only corpora open to sign-up (the public sign-up page refuses one when no corpus is:
    :func:`check_sign_up`)."""
    User = get_user_model()
    if role not in (Role.SUBMITTER, Role.ANNOTATOR):
        raise AccountError(f"role: expected submitter or annotator, got {role!r} (organisers are made by an organiser)",
                           code="role_invalid")
    if User.objects.filter(username__iexact=username).exists():
        raise AccountError(f"username: {username!r} is taken", code="username_taken", status=409)
    _check_user_name(username, "username")
    the_team = None
    if role == Role.SUBMITTER:
        name = check_team_name(team)
        the_team = Team.objects.filter(name__iexact=name).first()
        if the_team is None:
            the_team = Team.objects.create(name=name, approved=not getattr(settings, "TEAM_APPROVAL", False))
        elif not invite_code or not secrets.compare_digest(invite_code.strip(), the_team.invite_code):
            raise AccountError(f"team: {name!r} exists; to join it, give its invite code (a member finds it on their "
                               "account page)", code="team_exists", status=409)
    invite = check_invite(invite_code) if role == Role.ANNOTATOR and (invite_code or "").strip() else None
    declared = check_ties(ties) if role == Role.ANNOTATOR else []
    user = User.objects.create_user(username=username, email=email, password=password)
    prof = Profile.objects.create(user=user, role=role, team=the_team, affiliation=affiliation)
    if invite is not None:
        _redeem(invite, user, prof, declared)
    elif declared:
        prof.conflicts.add(*declared)
    return user


@transaction.atomic
def do_redeem_invite(user, code: str, ties: str = "") -> Profile:
    """An annotator who signed up without an invite gives one now, declaring their teams again (``ties``,
    :func:`check_ties`): the account may annotate every corpus."""
    inv = check_invite(code)
    prof, _ = Profile.objects.get_or_create(user=user, defaults={"role": Role.ANNOTATOR})
    if prof.role != Role.ANNOTATOR:
        raise AccountError("invite_code: invites are for annotator accounts", code="invite_role", status=403)
    _redeem(inv, user, prof, check_ties(ties))
    user.__dict__.pop("_unpooled_profile", None)
    return prof


def do_make_invite(organiser, *, note: str = "", conflicts=(), days: int = INVITE_DAYS) -> Invite:
    """An organiser's invite for one annotator account, valid ``days`` days; ``conflicts``: teams whose
    instances the invitee must never label."""
    if not is_organiser(organiser):
        raise AccountError("only organisers invite annotators", code="forbidden", status=403)
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= 365:
        raise AccountError(f"days: expected a whole number of days from 1 to 365, got {days!r}", code="invite_days")
    inv = Invite.objects.create(code=secrets.token_urlsafe(18), role=Role.ANNOTATOR, note=(note or "").strip()[:200],
                                created_by=organiser, expires=timezone.now() + timedelta(days=days))
    inv.conflicts.set(list(conflicts))
    return inv


def do_set_role(user, role: str, *, team: Team | None = None):
    """Organisers change roles (an organiser is also staff, for the admin); an organiser who makes someone an
    annotator vouches for them (as an invite would)."""
    if role not in Role.values:
        raise AccountError(f"role: expected one of {', '.join(Role.values)}, got {role!r}", code="role_invalid")
    prof, _ = Profile.objects.get_or_create(user=user, defaults={"role": role, "team": team})
    prof.role = role
    prof.invited = prof.invited or role == Role.ANNOTATOR
    if team is not None:
        prof.team = team
    prof.save()
    user.is_staff = role == Role.ORGANISER or user.is_superuser
    user.save(update_fields=["is_staff"])
    user.__dict__.pop("_unpooled_profile", None)
    return prof


#: the roles ``unpooled user add`` accepts, and the stored role each one means ("participant", the command's word
#: before one word per role was chosen, is still taken for ``submitter``)
ADD_USER_ROLES = {"organiser": Role.ORGANISER, "participant": Role.SUBMITTER, "submitter": Role.SUBMITTER,
                  "annotator": Role.ANNOTATOR}


#: the longest password taken (the sign-up form's limit too)
PASSWORD_MAX = 200


def check_add_user(username: str, role: str, *, team: str = "", create_team: bool = False,
                   password: str | None = None) -> tuple[str, Team | None]:
    """Validate ``unpooled user add``: the stored role and the team (``None`` for a team still to be made with
    ``create_team``); raises :class:`AccountError` naming the field, what is accepted and what was given."""
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    User = get_user_model()
    username = (username or "").strip()
    if not username:
        raise AccountError("NAME: a user name is required", code="username_required")
    try:
        User.username_validator(username)
    except ValidationError:
        raise AccountError(f"NAME: {username!r} is not a valid user name (letters, digits and @ . + - _ only)",
                           code="username_invalid") from None
    if len(username) > User._meta.get_field("username").max_length:
        raise AccountError(f"NAME: at most {User._meta.get_field('username').max_length} characters",
                           code="username_invalid")
    _check_user_name(username, "NAME")
    if role not in ADD_USER_ROLES:
        raise AccountError(f"--role: expected organiser, submitter or annotator, got {role!r}", code="role_invalid")
    stored = ADD_USER_ROLES[role]
    if User.objects.filter(username__iexact=username).exists():
        raise AccountError(f"NAME: a user {username!r} exists already", code="username_taken", status=409)
    the_team = None
    team = (team or "").strip()
    if stored == Role.SUBMITTER and not team:
        raise AccountError("--team: a submitter belongs to a team: give --team NAME", code="team_required")
    if team:
        name = check_team_name(team)
        the_team = Team.objects.filter(name__iexact=name).first()
        if the_team is None and not create_team:
            known = list(Team.objects.order_by("name").values_list("name", flat=True)[:20])
            raise AccountError(f"--team: no team {name!r} (teams: {', '.join(known) if known else 'none yet'}); "
                               "add --create-team to make it", code="team_unknown", status=404)
    if password is not None:
        if len(password) > PASSWORD_MAX:
            raise AccountError(f"password: at most {PASSWORD_MAX} characters, got {len(password):,}",
                               code="password_invalid")
        if "\x00" in password or any("\ud800" <= c <= "\udfff" for c in password):
            raise AccountError("password: text without NUL characters, in UTF-8 (standard input held binary data)",
                               code="password_invalid")
        try:
            validate_password(password, User(username=username))
        except ValidationError as exc:
            raise AccountError("password: " + " ".join(exc.messages), code="password_invalid") from None
    return stored, the_team


@transaction.atomic
def do_add_user(username: str, role: str, *, team: str = "", create_team: bool = False,
                password: str | None = None, email: str = ""):
    """Create a user with ``role`` (``organiser``, ``submitter`` or ``annotator``) and, for a submitter, a
    team (made when ``create_team``).  Without ``password`` one is generated.  Returns ``(user, password)``.

    An organiser is also staff (the admin); an annotator made here is vouched for (as by an invite)."""
    stored, the_team = check_add_user(username, role, team=team, create_team=create_team, password=password)
    if the_team is None and (team or "").strip():
        the_team = Team.objects.create(name=check_team_name(team))
    if password is None:
        password = secrets.token_urlsafe(12)
    User = get_user_model()
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username.strip(), email=email, password=password)
    except IntegrityError:
        raise AccountError(f"NAME: a user {username!r} exists already", code="username_taken", status=409) from None
    do_set_role(user, stored, team=the_team)
    return user, password


# ---------------------------------------------------------------------------- tokens

def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


#: live (unrevoked) API tokens a team may hold (security review N7: 120 tokens on one team in 4.5 s)
MAX_TOKENS_PER_TEAM = 20


def do_issue_token(user, name: str = "api") -> tuple[ApiToken, str]:
    """A new token for the user's team, or, for an organiser outside any team, a token of their own (it acts as
    the organiser and submits for no team); returns the row and the token itself (shown once)."""
    team = team_of(user)
    if team is None and role_of(user) != Role.ORGANISER:
        raise AccountError("only members of a team and organisers can make API tokens (sign up as a submitter)",
                           code="no_team", status=403)
    live = ApiToken.objects.filter(team=team, revoked__isnull=True, **({} if team else {"user": user})).count()
    if live >= MAX_TOKENS_PER_TEAM:
        holder = f"team {team.name!r}" if team else "you"
        raise AccountError(f"{holder} has {live} live API tokens, the most a team or an organiser may hold; revoke "
                           "one first", code="too_many_tokens", status=409)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(30)
    tok = ApiToken.objects.create(team=team, user=user, name=(name or "api").strip()[:100] or "api",
                                  prefix=raw[:12], digest=_digest(raw))
    return tok, raw


def do_revoke_token(user, token_id: int) -> ApiToken:
    tok = ApiToken.objects.filter(pk=token_id).select_related("team").first()
    # a team's token: its members and the organisers; an organiser's own (no team): organisers only
    if tok is None or not (is_organiser(user) or (tok.team_id is not None and tok.team == team_of(user))):
        raise AccountError(f"token {token_id}: no such token of your team", code="not_found", status=404)
    if tok.revoked is None:
        tok.revoked = timezone.now()
        tok.save(update_fields=["revoked"])
    return tok


def authenticate_token(raw: str) -> ApiToken | None:
    """The live token for a bearer string, or ``None``. Records its last use (at most once a minute).

    A token acts for its team only while its user is still a member of that team in a role that submits (a
    submitter or an organiser): a member moved to another team, or made an annotator (who could then judge their
    old team's output while still submitting for it), has a dead token (security review N8)."""
    if not raw or not raw.startswith(TOKEN_PREFIX):
        return None
    tok = (ApiToken.objects.filter(digest=_digest(raw), revoked__isnull=True)
           .select_related("team", "user").first())
    if tok is None or not tok.user.is_active:
        return None
    if team_of(tok.user) != tok.team or role_of(tok.user) not in (Role.SUBMITTER, Role.ORGANISER):
        return None
    if tok.team_id is None and role_of(tok.user) != Role.ORGANISER:  # an organiser's token dies with the role
        return None
    now = timezone.now()
    if tok.last_used is None or now - tok.last_used > timedelta(minutes=1):
        ApiToken.objects.filter(pk=tok.pk).update(last_used=now)
    return tok


# ---------------------------------------------------------------------------- quotas

# the quota itself belongs to the submissions app (a team's accepted submissions); re-exported here
from unpooled.service.submissions.quota import Quota, QuotaError, check_quota, quota  # noqa: E402,F401


MAX_QUOTA = 2 ** 31 - 1  # the quota columns' range on PostgreSQL (an integer): above it, a 500 there


def do_set_quota(team: Team, *, per_day: int | None, total: int | None) -> Team:
    for name, v in (("per_day", per_day), ("total", total)):
        if v is not None and (not isinstance(v, int) or not 0 <= v <= MAX_QUOTA):
            raise AccountError(f"{name}: expected an integer from 0 to {MAX_QUOTA} or nothing, got {v!r}",
                               code="quota_invalid")
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
           "check_invite", "check_quota", "check_sign_up", "check_ties", "do_issue_token", "do_make_invite", "do_redeem_invite",
           "do_revoke_token", "do_set_quota", "do_set_role", "do_sign_up", "open_signup",
           "is_organiser", "quota", "role_of", "team_of", "visible_submissions"]
