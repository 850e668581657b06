"""Accounts: a role and a team per user, and per-team API tokens.

Roles: a *submitter* uploads knowledge bases for a team and sees that team's private
submissions; an *annotator* answers annotation tasks (and never sees which system asked
for an item); an *organiser* runs the service (corpora, budgets, quotas, retries; the
Django admin).  A user without a profile (made by ``createsuperuser`` or before accounts
existed) counts as an annotator, or as an organiser when staff.

API tokens belong to a team; only their SHA-256 digest is stored, so a token is shown
once, when it is made.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from unpooled.service.submissions.models import Team


class Role(models.TextChoices):
    SUBMITTER = "submitter", "submitter"
    ANNOTATOR = "annotator", "annotator"
    ORGANISER = "organiser", "organiser"


class Profile(models.Model):
    """A user's role and team. ``invited``: an organiser's invite made (or vouches for) the account, so it may
    annotate every corpus; an annotator who signed up without one annotates only corpora open to sign-up.
    ``conflicts``: teams whose instances this person never labels (besides their own ``team``)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.SUBMITTER)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="members")
    affiliation = models.CharField(max_length=200, blank=True)
    invited = models.BooleanField(default=False, help_text="an organiser invited or vouched for this account")
    conflicts = models.ManyToManyField(Team, blank=True, related_name="conflicted_profiles",
                                       help_text="teams whose instances this person never labels")
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user} ({self.role})"


class ApiToken(models.Model):
    """A bearer token for the REST API and ``unpooled submit --token``, acting for ``team``; an organiser's token
    has no team (it acts as the organiser: periods, the label pool, releases)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens", null=True, blank=True,
                             help_text="the team it submits for; none: an organiser's token")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens",
                             help_text="who made it; the API acts as this user")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="the token's first characters, to recognise it")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token")
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.team.name if self.team_id else 'organiser ' + self.user.get_username()}: {self.name} ({self.prefix}…)"


class Invite(models.Model):
    """An organiser's invite to make an annotator account: one use, until ``expires``.

    ``conflicts``: teams the invitee must never label for (a colleague's, a former employer's)."""

    code = models.CharField(max_length=64, unique=True)
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.ANNOTATOR)
    note = models.CharField(max_length=200, blank=True, help_text="who it is for (shown to organisers only)")
    conflicts = models.ManyToManyField(Team, blank=True, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    used_by = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="invite")
    used = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"invite {self.code[:6]}… ({self.note or self.role})"
