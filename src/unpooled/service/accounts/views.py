"""Sign-up, the account page (team, invite code, quota, API tokens)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from . import actions, throttle
from .forms import InviteForm, RedeemForm, SignUpForm, TokenForm
from .models import ApiToken, Invite, Role
from .throttle import ThrottledAuthenticationForm

class SignIn(LoginView):
    """The sign-in page: its form refuses, with a wait, while the throttle's limits are reached; the page says
    why to sign in (from ``next``) and how to get an account (annotators: by invite, unless sign-up is open)."""

    authentication_form = ThrottledAuthenticationForm

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        ctx["open_signup"] = actions.open_signup()
        return ctx


sign_in = SignIn.as_view()


def _field_error(form, exc: actions.AccountError) -> None:
    field, _, msg = str(exc).partition(": ")
    form.add_error(field if field in form.fields else None, msg or str(exc))


def signup(request):
    if request.method == "POST":
        form = SignUpForm(request.POST)
        wait = throttle.begin_sign_up(request) if form.is_valid() else 0
        if wait:
            form.add_error(None, throttle.sign_up_message(wait))
        elif form.is_valid():
            d = form.cleaned_data
            try:
                actions.check_sign_up(d["role"], d.get("invite_code") or "")
                user = actions.do_sign_up(d["username"], d["password"], email=d.get("email") or "", role=d["role"],
                                          team=d.get("team") or "", invite_code=d.get("invite_code") or "",
                                          affiliation=d.get("affiliation") or "", ties=d.get("ties") or "")
            except actions.AccountError as exc:
                _field_error(form, exc)
            else:
                login(request, user, backend="unpooled.service.accounts.throttle.ThrottledModelBackend")
                return redirect("accounts:home")
    else:
        form = SignUpForm(initial={"invite_code": request.GET.get("invite", "")[:64],
                                   **({"role": Role.ANNOTATOR} if request.GET.get("invite") else {})})
    return render(request, "accounts/signup.html", {"form": form})


@login_required
@require_POST
def invite_redeem(request):
    form = RedeemForm(request.POST)
    if form.is_valid():
        try:
            actions.do_redeem_invite(request.user, form.cleaned_data["invite_code"], form.cleaned_data.get("ties"))
        except actions.AccountError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, "Invite accepted: you may annotate every corpus.")
    else:
        messages.error(request, "invite_code: " + " ".join(form.errors.get("invite_code", ["required"])))
    return redirect("accounts:account")


@login_required
def invites(request):
    """Organisers: make an invite for an annotator account, and see the invites made."""
    if not actions.is_organiser(request.user):
        raise PermissionDenied("only organisers invite annotators")
    form = InviteForm(request.POST or None)
    made = None
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            made = actions.do_make_invite(request.user, note=d.get("note") or "", conflicts=d.get("conflicts") or (),
                                          days=d["days"])
        except actions.AccountError as exc:
            _field_error(form, exc)
        else:
            form = InviteForm()
    rows = Invite.objects.select_related("used_by", "created_by").prefetch_related("conflicts")[:200]
    return render(request, "accounts/invites.html", {"form": form, "invites": rows, "made": made},
                  status=400 if form.errors else 200)


@login_required
def home(request):
    """Where a sign-in lands: annotators on the work queue, everyone else on their account page."""
    if actions.role_of(request.user) == Role.ANNOTATOR:
        return redirect("annotation:queue")
    return redirect("accounts:account")


@login_required
def account(request):
    return _account_page(request)


def _account_page(request, new_token: str | None = None):
    team = actions.team_of(request.user)
    ctx = {"role": actions.role_of(request.user), "team": team, "form": TokenForm(),
           "new_token": new_token, "redeem": RedeemForm()}
    prof = getattr(request.user, "profile", None)
    ctx["invited"] = prof is None or prof.invited
    if team is not None:
        ctx["quota"] = actions.quota(team)
        ctx["tokens"] = ApiToken.objects.filter(team=team).select_related("user")
        ctx["submissions"] = team.submissions.select_related("team", "corpus").order_by("-created")[:50]
        ctx["members"] = team.members.select_related("user")
    elif ctx["role"] == Role.ORGANISER:
        ctx["tokens"] = ApiToken.objects.filter(team=None, user=request.user).select_related("user")
    resp = render(request, "accounts/account.html", ctx)
    if new_token:
        resp["Cache-Control"] = "no-store"
    return resp


@login_required
@require_POST
def token_create(request):
    """The new token is shown once, in this answer: it is never stored (the session kept it until the next page)."""
    form = TokenForm(request.POST)
    if form.is_valid():
        try:
            _, raw = actions.do_issue_token(request.user, form.cleaned_data["name"])
        except actions.AccountError as exc:
            messages.error(request, str(exc))
        else:
            return _account_page(request, new_token=raw)
    return redirect("accounts:account")


@login_required
@require_POST
def token_revoke(request, pk: int):
    try:
        actions.do_revoke_token(request.user, pk)
    except actions.AccountError as exc:
        messages.error(request, str(exc))
    return redirect("accounts:account")
