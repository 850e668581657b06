"""Sign-up, the account page (team, invite code, quota, API tokens)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from . import actions
from .forms import SignUpForm, TokenForm
from .models import ApiToken, Role


def signup(request):
    if request.method == "POST":
        form = SignUpForm(request.POST)
        if form.is_valid():
            d = form.cleaned_data
            try:
                user = actions.do_sign_up(d["username"], d["password"], email=d.get("email") or "", role=d["role"],
                                          team=d.get("team") or "", invite_code=d.get("invite_code") or "",
                                          affiliation=d.get("affiliation") or "")
            except actions.AccountError as exc:
                field, _, msg = str(exc).partition(": ")
                form.add_error(field if field in form.fields else None, msg or str(exc))
            else:
                login(request, user, backend="django.contrib.auth.backends.ModelBackend")
                return redirect("accounts:home")
    else:
        form = SignUpForm()
    return render(request, "accounts/signup.html", {"form": form})


@login_required
def home(request):
    """Where a sign-in lands: annotators on the work queue, everyone else on their account page."""
    if actions.role_of(request.user) == Role.ANNOTATOR:
        return redirect("annotation:queue")
    return redirect("accounts:account")


@login_required
def account(request):
    team = actions.team_of(request.user)
    ctx = {"role": actions.role_of(request.user), "team": team, "form": TokenForm(),
           "new_token": request.session.pop("new_token", None)}
    if team is not None:
        ctx["quota"] = actions.quota(team)
        ctx["tokens"] = ApiToken.objects.filter(team=team).select_related("user")
        ctx["submissions"] = team.submissions.select_related("corpus").order_by("-created")[:50]
        ctx["members"] = team.members.select_related("user")
    return render(request, "accounts/account.html", ctx)


@login_required
@require_POST
def token_create(request):
    form = TokenForm(request.POST)
    if form.is_valid():
        try:
            _, raw = actions.do_issue_token(request.user, form.cleaned_data["name"])
        except actions.AccountError as exc:
            messages.error(request, str(exc))
        else:
            request.session["new_token"] = raw  # shown once, on the next page
    return redirect("accounts:account")


@login_required
@require_POST
def token_revoke(request, pk: int):
    try:
        actions.do_revoke_token(request.user, pk)
    except actions.AccountError as exc:
        messages.error(request, str(exc))
    return redirect("accounts:account")
