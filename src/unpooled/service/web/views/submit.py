"""Submitting: the upload form, the upload's validation, and the submission's live status."""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from unpooled.service.accounts import actions as accounts
from unpooled.service.corpora.models import Corpus
from unpooled.service.submissions import uploads
from unpooled.service.submissions.actions import stage_error
from unpooled.service.submissions.models import Submission, Team
from unpooled.service.submissions.storage import FULL_MESSAGE, StorageFull, discard_received, storage_full

from ..forms import UploadForm


@login_required
def upload(request):
    organiser = accounts.is_organiser(request.user)
    team = accounts.team_of(request.user)
    if team is None and not organiser:
        return render(request, "web/upload.html", {"no_team": True}, status=403)
    status = 200
    if request.method == "POST":
        try:
            data, files = request.POST, request.FILES  # the body is received here (large files: to a temporary file)
        except OSError as exc:
            if not storage_full(exc):
                raise
            discard_received(request)
            data, files, status = request.POST, {}, 507
        form = UploadForm(data, files)
        if status == 507:
            form.is_valid()
            form.errors.clear()
            form.add_error(None, FULL_MESSAGE)
        elif form.is_valid():
            f = form.cleaned_data["file"]
            team_name = (form.cleaned_data["team"] or "").strip() if organiser else ""
            team_name = team_name or (team.name if team else "")
            if not team_name:
                form.add_error("team", "name the team this run is for")
            elif f.size > settings.LIMITS.max_bytes:
                form.add_error("file", f"the file is larger than the limit of {settings.LIMITS.max_bytes:,} bytes")
            else:
                the_team = Team.objects.filter(name=team_name).first()
                try:
                    if the_team is not None:
                        accounts.check_quota(the_team)
                except (accounts.AccountError, accounts.QuotaError) as exc:
                    form.add_error(None, str(exc))
                else:
                    try:
                        dest = uploads.save_upload(f.chunks())  # a private file (0600); nothing kept if it fails
                    except StorageFull as exc:
                        form.add_error(None, str(exc))
                        status = 507
                    else:
                        try:
                            result = uploads.start_upload(
                                dest, corpus=form.cleaned_data["corpus"].name, team=team_name,
                                run=form.cleaned_data["run"], fmt=form.cleaned_data["format"], file_name=f.name,
                                visibility=form.cleaned_data["visibility"],
                                description=form.cleaned_data["description"] or "", user=request.user,
                                address=uploads.client_address(request), limited=not organiser)
                        except accounts.QuotaError as exc:  # too many rejected or waiting uploads
                            form.add_error(None, str(exc))
                        else:
                            request.session[LAST_CORPUS] = form.cleaned_data["corpus"].name
                            url = f"/submissions/uploads/{result.id}/"
                            if request.headers.get("x-requested-with") == "fetch":
                                return JsonResponse({"upload": str(result.id), "status_url": url}, status=202)
                            return redirect("web:upload_status", task_id=result.id)
        if request.headers.get("x-requested-with") == "fetch":
            return JsonResponse({"errors": {k: [str(e) for e in v] for k, v in form.errors.items()}},
                                status=400 if status == 200 else status)
    else:
        form = UploadForm(initial={"corpus": initial_corpus(request, team)})
    # corpora whose evaluation period closed, said before anyone uploads to them (UX review #9)
    closed = list(Corpus.objects.filter(periods__isnull=False).exclude(periods__closed__isnull=True)
                  .distinct().order_by("name").values_list("name", flat=True))
    return render(request, "web/upload.html", {"form": form, "organiser": organiser, "team": team, "closed": closed},
                  status=status)


LAST_CORPUS = "unpooled.last-corpus"  # session: the corpus of this browser's last upload


def initial_corpus(request, team) -> str | None:
    """The corpus the upload form starts on: the page's ``?corpus=`` (the Participate page links so), else the
    corpus of this session's last upload, else of the team's newest submission; None: the form's first."""
    names = set(Corpus.objects.values_list("name", flat=True))
    for name in (request.GET.get("corpus", ""), request.session.get(LAST_CORPUS, "")):
        if name in names:
            return name
    if team is not None:
        last = team.submissions.order_by("-created").values_list("corpus__name", flat=True).first()
        if last:
            return last
    return None


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _printable(v):
    """Diagnostics echo the uploaded bytes: control characters (NUL...) are shown as U+FFFD."""
    if isinstance(v, str):
        return _CONTROL.sub("\ufffd", v)
    if isinstance(v, dict):
        return {k: _printable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_printable(x) for x in v]
    return v


@login_required
def upload_status(request, task_id: str):
    """An upload's validation, for the uploading team, the user who uploaded and organisers (as
    ``GET /api/uploads/{id}``; anyone else: 404). A crashed validation shows what failed, never the traceback."""
    from django_tasks import TaskResultStatus

    result = uploads.visible_upload(task_id, user=request.user, team=accounts.team_of(request.user),
                                    organiser=accounts.is_organiser(request.user))
    if result is None:
        raise Http404("no such upload")
    outcome = result.return_value if result.status == TaskResultStatus.SUCCESSFUL else None
    if outcome and outcome.get("ok"):
        return redirect("web:status", pk=outcome["submission"])
    errors = []
    if result.status == TaskResultStatus.FAILED:  # the traceback stays in the worker's log
        what = result.errors[-1].exception_class_path.rsplit(".", 1)[-1] if result.errors else "unknown error"
        errors = [f"Validating the file failed on the server ({what}); nothing was stored. Upload it again; if it "
                  "fails again, tell the organisers (the server's log has the details)."]
    name = result.args[1] if len(result.args) > 1 else result.kwargs.get("corpus")
    corpus = Corpus.objects.select_related("schema").filter(name=name).first() if isinstance(name, str) else None
    return render(request, "web/upload_status.html", {"result": result, "outcome": _printable(outcome),
                                                      "errors": errors, "done": result.is_finished,
                                                      "corpus": corpus, "corpus_name": name})


@login_required
def upload_history(request):
    """The uploads of the user's team (without a team: the user's own), newest first, each with what became of it;
    a rejected one keeps its diagnostics (:func:`unpooled.service.submissions.uploads.history_outcome`) after the
    upload's own status page has expired."""
    team = accounts.team_of(request.user)
    attempts = list(uploads.upload_history(team, request.user))
    return render(request, "web/upload_history.html", {"attempts": attempts, "team": team,
                                                       "keep_days": uploads.HISTORY_DAYS})


def _visible(request, pk: int) -> Submission:
    sub = get_object_or_404(Submission.objects.select_related("team", "corpus"), pk=pk)
    if not accounts.can_view(request.user, sub):
        raise Http404("no such submission")
    return sub


def status(request, pk: int):
    """The live status page: stage, labels received / needed, cost so far, time left, newest scores."""
    from unpooled.service.evaluations.status import newest_scores, progress

    sub = _visible(request, pk)
    p = progress(sub)
    p["error"] = stage_error(sub, manage=accounts.can_manage(request.user, sub))
    return render(request, "web/status.html", {
        "sub": sub, "p": p, "scores": newest_scores(sub),
        "can_retry": accounts.is_organiser(request.user) and sub.status == Submission.Status.FAILED})


def status_json(request, pk: int):
    """The status page's figures as JSON, with ``html``: the page's live part rendered afresh (web/status.js puts it
    in place, so that the page and its updates say the same in the same words)."""
    from django.template.loader import render_to_string

    from unpooled.service.evaluations.status import newest_scores, progress

    sub = _visible(request, pk)
    out = progress(sub)
    out["error"] = stage_error(sub, manage=accounts.can_manage(request.user, sub))
    scores = newest_scores(sub)
    out["scores"] = {lv: {**{k: getattr(s, k) for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo",
                                                        "f1_hi")}, "anytime": (s.details or {}).get("anytime")}
                     for lv, s in scores.items()}
    out["html"] = render_to_string("web/_status_live.html", {"sub": sub, "p": out, "scores": scores}, request=request)
    return JsonResponse(out)


@login_required
@require_POST
def retry(request, pk: int):
    from unpooled.service.evaluations.lifecycle import LifecycleError
    from unpooled.service.evaluations.tasks import retry as do_retry

    if not accounts.is_organiser(request.user):  # before the look-up: the answer says nothing of which ids exist
        return render(request, "web/upload.html", {"forbidden": "only organisers can retry a stage"}, status=403)
    sub = get_object_or_404(Submission, pk=pk)
    try:
        do_retry(sub)
    except LifecycleError as exc:
        from django.contrib import messages

        messages.error(request, str(exc))
    return redirect("web:status", pk=pk)
