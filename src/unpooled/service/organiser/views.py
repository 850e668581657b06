"""Organiser console pages. Thin: pick the corpus, call :mod:`.console`, render.

Organisers only (:func:`unpooled.service.accounts.actions.is_organiser`): anonymous users are
sent to sign in, everybody else gets 403.  The annotation section
(``/organiser/annotation/``) is :func:`unpooled.service.annotation.views.organiser`.
"""

from __future__ import annotations

import tempfile
from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from unpooled.core.annotation.relation_groups import MIN_STRATUM_CONTROLS
from unpooled.core.annotation.fitcheck import WEAK_SEPARATION
from unpooled.core.sampling import FEW_DOCUMENTS, small_sample_warning
from unpooled.core.sampling.documents import COVERAGE_BELOW
from unpooled.service.accounts.actions import is_organiser
from unpooled.service.annotation import release as release_mod
from django.db.models import Count

from unpooled.service.annotation.actions import AnnotationError, settings_for
from unpooled.service.annotation.models import Backend, ExhaustiveDocument
from unpooled.service.annotation.sampling import SCHEMES as SAMPLING_SCHEMES
from unpooled.service.annotation.sampling import sample_documents
from unpooled.service.annotation.status import status as annotation_status
from unpooled.service.corpora.models import Corpus
from unpooled.service.evaluations.rates import crowd_fit
from unpooled.service.submissions.models import Submission, Team

from . import console, documents
from .heartbeats import worker_rows
from .forms import QuotaForm, SettingsForm


def organiser_required(view):
    """Sign in first; then organisers only (403 for the rest)."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not is_organiser(request.user):
            raise PermissionDenied("the organiser console is for organisers only")
        return view(request, *args, **kwargs)

    return wrapped


def console_context(request, section: str, *, per_corpus: bool = True) -> dict:
    """Corpora for the selector and the chosen one (``?corpus=``, else the first by name)."""
    corpora = list(Corpus.objects.select_related("schema").order_by("name"))
    name = request.POST.get("corpus") or request.GET.get("corpus") or (corpora[0].name if corpora else None)
    corpus = next((c for c in corpora if c.name == name), None)
    if per_corpus and name and corpus is None and corpora:
        raise Http404(f"no corpus {name!r}")
    return {"corpora": corpora, "corpus": corpus, "section": section, "per_corpus": per_corpus, "alerts": []}


def _back(name: str, corpus: Corpus | None) -> str:
    url = reverse(name)
    return f"{url}?corpus={corpus.name}" if corpus is not None else url


@organiser_required
def home(request):
    ctx = console_context(request, "home")
    ctx["workers"] = worker_rows()
    if ctx["corpus"] is not None:
        ov = console.overview(ctx["corpus"])
        ctx.update(ov=ov, alerts=ov["alerts"])
    return render(request, "organiser/home.html", ctx)


@organiser_required
def settings_page(request):
    ctx = console_context(request, "settings")
    corpus = ctx["corpus"]
    if corpus is None:
        return render(request, "organiser/settings.html", ctx)
    st = settings_for(corpus)
    status = 200
    if request.method == "POST":
        was = st.backend   # the form writes the posted values on st
        form = SettingsForm(request.POST, instance=st, corpus=corpus)
        if form.is_valid():
            before = console.current_settings(corpus)
            console.do_update_settings(corpus, {f: form.cleaned_data[f] for f in console.SETTINGS_FIELDS},
                                       user=request.user)
            messages.success(request, _settings_saved(corpus, form, before, console.current_settings(corpus))
                             + _left_mturk(corpus, was))
            return redirect(_back("organiser:settings", corpus))
        status = 400
    else:
        form = SettingsForm(instance=st, corpus=corpus)
    ctx.update(form=form, alerts=console.alerts(corpus))
    return render(request, "organiser/settings.html", ctx, status=status)


def _settings_saved(corpus, form, before: dict, after: dict) -> str:
    """What a save changed, old to new, in the form's words; and that it applies from now on."""
    shown = lambda x: "none" if x is None or x == "" else str(x)  # noqa: E731
    changes = [f"{form.fields[f].label}: {shown(before[f])} → {shown(after[f])}"
               for f in console.SETTINGS_FIELDS if before[f] != after[f]]
    if not changes:
        return f"annotation settings of {corpus.name}: nothing changed"
    return (f"annotation settings of {corpus.name} saved: {'; '.join(changes)}. They apply to tasks created "
            f"from now on and to submissions sampled from now on (open tasks keep their answers and rewards).")


def _left_mturk(corpus, was: str) -> str:
    """What happens to the HITs of a corpus the settings just took off Mechanical Turk ("" if nothing)."""
    from unpooled.service.crowd.mturk_sync import unsettled

    n = unsettled(corpus).count() if was == Backend.MTURK and settings_for(corpus).backend != was else 0
    return (f" The corpus left Mechanical Turk: its {n} HIT{'s' if n != 1 else ''} on Mechanical Turk are being "
            "expired, and what workers submitted to them is still reviewed, approved or rejected, until every one is "
            "settled." if n else "")


@organiser_required
def submissions(request):
    ctx = console_context(request, "submissions")
    if ctx["corpus"] is not None:
        ctx.update(rows=console.submission_rows(ctx["corpus"]), alerts=console.alerts(ctx["corpus"]))
    return render(request, "organiser/submissions.html", ctx)


@require_POST
@organiser_required
def retry(request, pk: int):
    sub = get_object_or_404(Submission.objects.select_related("corpus", "team"), pk=pk)
    try:
        stage = console.do_retry(request.user, sub)
    except console.ConsoleError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"submission {sub.pk} ({sub.team.name}/{sub.run_id}) resumes at stage {stage}")
    return redirect(_back("organiser:submissions", sub.corpus))


def _teams_page(request, *, errors: dict | None = None, status: int = 200):
    ctx = console_context(request, "teams", per_corpus=False)
    rows = console.team_rows()
    for row in rows:
        bound = (errors or {}).get(row["pk"])
        row["form"] = bound or QuotaForm(initial={"per_day": row["own_per_day"], "total": row["own_total"]},
                                         prefix=f"t{row['pk']}")
    ctx.update(rows=rows, default_per_day=settings.QUOTA_PER_DAY, default_total=settings.QUOTA_TOTAL,
               approval=settings.TEAM_APPROVAL, waiting=sum(not r["approved"] for r in rows))
    return render(request, "organiser/teams.html", ctx, status=status)


@organiser_required
def teams(request):
    return _teams_page(request)


@require_POST
@organiser_required
def team_approve(request, pk: int):
    """Approve a team waiting to submit (``approved=1``), or stop it (``approved=0``)."""
    team = get_object_or_404(Team, pk=pk)
    approved = request.POST.get("approved", "1") == "1"
    console.do_approve_team(request.user, team, approved=approved)
    messages.success(request, f"team {team.name} {'may submit' if approved else 'may not submit until approved'}")
    return redirect("organiser:teams")


@require_POST
@organiser_required
def team_quota(request, pk: int):
    team = get_object_or_404(Team, pk=pk)
    form = QuotaForm(request.POST, prefix=f"t{team.pk}")
    if form.is_valid():
        try:
            console.do_team_quota(request.user, team, per_day=form.cleaned_data["per_day"],
                                  total=form.cleaned_data["total"])
        except console.ConsoleError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"quotas of team {team.name} saved")
            return redirect("organiser:teams")
    return _teams_page(request, errors={team.pk: form}, status=400)


@organiser_required
def release(request):
    """The corpus's dataset release as a zip (labels, answers, exhaustive annotations, README)."""
    ctx = console_context(request, "release")
    corpus = ctx["corpus"]
    if corpus is None:
        raise Http404("no corpus yet")
    now = timezone.now()
    out = tempfile.TemporaryFile()
    release_mod.write_release_zip(corpus, out, now=now)
    out.seek(0)
    return FileResponse(out, as_attachment=True, filename=release_mod.release_name(corpus, now) + ".zip",
                        content_type="application/zip")


@organiser_required
def annotation(request):
    """The organiser console's annotation section: alerts, progress and cost per task type, cost per
    submission, agreement, annotator quality, stalled tasks (logic in :mod:`unpooled.service.organiser.console`)."""
    ctx = console_context(request, "annotation")
    corpus = ctx["corpus"]
    if corpus is not None:
        stalled = console.stalled_tasks(corpus)
        ctx.update(st=annotation_status(corpus), stalled=stalled, budget=console.corpus_budget(corpus),
                   submissions=console.submission_rows(corpus), alerts=console.alerts(corpus, stalled=stalled),
                   crowd_fit=crowd_fit(corpus), weak_separation=WEAK_SEPARATION,
                   min_stratum_controls=MIN_STRATUM_CONTROLS)
    return render(request, "annotation/organiser.html", ctx)


# ---------------------------------------------------------------------------- evaluation periods

@organiser_required
def periods(request):
    """The corpus's evaluation periods: open one, close the open one (freezing its scores), release a closed one's
    annotated data, start the next period on another corpus (:mod:`unpooled.service.evaluations.periods`)."""
    from unpooled.service.evaluations import periods as periods_mod

    ctx = console_context(request, "periods")
    corpus = ctx["corpus"]
    if corpus is not None:
        from unpooled.service.evaluations import reference

        ref = reference.reference_of(corpus)
        rows = periods_mod.period_rows(corpus)
        ctx.update(rows=rows, current=periods_mod.open_period(corpus),
                   current_submissions=sum(r["submissions"] for r in rows if r["open"]),
                   uses_periods=corpus.periods.exists(), alerts=console.alerts(corpus), reference=ref,
                   reference_score=ref.scores.order_by("-id").first() if ref is not None else None)
    return render(request, "organiser/periods.html", ctx)


def _period_of(pk: int):
    from unpooled.service.corpora.models import Period

    return get_object_or_404(Period.objects.select_related("corpus"), pk=pk)


@require_POST
@organiser_required
def period_open(request):
    """Open a period on ``corpus`` (POST ``title``; ``follows``: the closed period this one continues)."""
    from unpooled.service.evaluations import periods as periods_mod

    corpus = get_object_or_404(Corpus, name=request.POST.get("corpus", ""))
    follows = _period_of(int(request.POST["follows"])) if request.POST.get("follows", "").isdigit() else None
    try:
        p = periods_mod.do_open_period(request.user, corpus, title=request.POST.get("title", ""), follows=follows)
    except periods_mod.PeriodError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"period {p.number} of {corpus.name} is open: uploads from now on belong to it")
    return redirect(_back("organiser:periods", corpus))


@require_POST
@organiser_required
def period_close(request, pk: int):
    from unpooled.service.evaluations import periods as periods_mod

    p = _period_of(pk)
    try:
        n = periods_mod.do_close_period(request.user, p)
    except periods_mod.PeriodError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"period {p.number} of {p.corpus.name} is closed: {n} published scores frozen; "
                                  "uploads are refused until a new period opens")
    return redirect(_back("organiser:periods", p.corpus))


@organiser_required
def period_release(request, pk: int):
    """A closed period's dataset release as a zip."""
    from unpooled.service.evaluations import periods as periods_mod

    p = _period_of(pk)
    out = tempfile.TemporaryFile()
    try:
        name, _ = periods_mod.do_release_period(request.user, p, out)
    except periods_mod.PeriodError as exc:
        out.close()
        messages.error(request, str(exc))
        return redirect(_back("organiser:periods", p.corpus))
    out.seek(0)
    return FileResponse(out, as_attachment=True, filename=name + ".zip", content_type="application/zip")


@require_POST
@organiser_required
def reference_request(request):
    """Build (or rebuild) the corpus's human reference from its exhaustive annotation and ask for the verification
    of its samples (:func:`unpooled.service.evaluations.reference.request`); its score follows the labels."""
    from unpooled.service.crowd.base import backend_for
    from unpooled.service.evaluations import reference

    corpus = get_object_or_404(Corpus, name=request.POST.get("corpus", ""))
    got = reference.request(corpus)
    if got.get("reference") is None:
        messages.error(request, f"{corpus.name} has no completely annotated exhaustive document yet: no human "
                                "reference to score")
    else:
        backend_for(corpus).publish(corpus)
        reference.score(corpus)
        messages.success(request, f"human reference of {corpus.name}: {got['draws']} instances drawn for its "
                                  f"precision, {got['recall_sample']} system instances for its recall; "
                                  f"{got['tasks_created']} verification items created")
    return redirect(_back("organiser:periods", corpus))


def _doc_options(request, corpus: Corpus) -> dict:
    src = request.POST if request.method == "POST" else request.GET
    return documents.options_iv(src.get("size", min(documents.DEFAULTS["size"], corpus.n_documents)),
                                src.get("draws", documents.DEFAULTS["draws"]),
                                src.get("seed", documents.DEFAULTS["seed"]), corpus.n_documents)


@organiser_required
def document_sampling(request):
    """Document sampling for exhaustive annotation: the schemes' figures (seed 000) for this corpus, and the
    form that draws the sample (logic in :mod:`.documents` and :mod:`unpooled.service.annotation.sampling`)."""
    return _documents_page(request, console_context(request, "documents"))


def _documents_page(request, ctx: dict, status: int = 200, **draw):
    """The document-sampling page; ``draw``: the draw form's values and errors when it was refused."""
    corpus = ctx["corpus"]
    if corpus is not None:
        try:
            opts = _doc_options(request, corpus)
        except documents.AnalysisError as exc:
            opts, status = dict(documents.DEFAULTS, size=min(documents.DEFAULTS["size"], corpus.n_documents)), 400
            ctx["option_error"] = str(exc)
        result, pending = documents.analysis_for_page(corpus, opts)
        ctx.update(opts=opts, result=result, pending=pending, schemes=SAMPLING_SCHEMES,
                   few_documents=[dict(scheme=k, least=FEW_DOCUMENTS[k], documents=COVERAGE_BELOW[k][0],
                                       coverage=f"{COVERAGE_BELOW[k][1]:.1%}", width=f"{COVERAGE_BELOW[k][4]:.0f}")
                                  for k in SAMPLING_SCHEMES],
                   inline_limit=documents.INLINE_DOCUMENTS, alerts=console.alerts(corpus),
                   draw_cost=documents.draw_cost(settings_for(corpus)),
                   draw=draw or {"values": {"scheme": _drawn_scheme(corpus), "sample_size": opts["size"],
                                            "sample_seed": 0}, "errors": {}},
                   drawn=ExhaustiveDocument.objects.filter(corpus=corpus).values("scheme", "stage")
                   .annotate(n=Count("id")).order_by("scheme", "stage"))
    return render(request, "organiser/documents.html", ctx, status=status)


def _documents_corpus(request) -> Corpus:
    """The console's corpus for the document-sampling actions (404 without one)."""
    corpus = console_context(request, "documents")["corpus"]
    if corpus is None:
        raise Http404("no corpus yet")
    return corpus


@require_POST
@organiser_required
def document_analysis(request):
    """Start the background analysis of a large corpus (one at a time per corpus and options)."""
    corpus = _documents_corpus(request)
    try:
        opts = _doc_options(request, corpus)
    except documents.AnalysisError as exc:
        messages.error(request, str(exc))
        return redirect(_back("organiser:documents", corpus))
    if documents.request_analysis(corpus, opts):
        messages.success(request, f"analysis of {corpus.name} started; this page shows it when it is done")
    else:
        messages.info(request, f"the analysis of {corpus.name} with these options is done or already running")
    q = f"&size={opts['size']}&draws={opts['draws']}&seed={opts['seed']}"
    return redirect(_back("organiser:documents", corpus) + q)


def _drawn_scheme(corpus) -> str:
    """The scheme the draw form offers first: the one of the sample drawn so far (a corpus's sample has one
    scheme; another is refused), else seed."""
    drawn = ExhaustiveDocument.objects.filter(corpus=corpus).values_list("scheme", flat=True).first()
    return drawn if drawn in SAMPLING_SCHEMES else "seed"


def _draw_errors(values: dict, n_documents: int) -> dict:
    """The draw form's errors by field (scheme, sample_size, sample_seed)."""
    errors = {}
    if values["scheme"] not in SAMPLING_SCHEMES:
        errors["scheme"] = f"expected one of {', '.join(SAMPLING_SCHEMES)}, got {values['scheme']!r}"
    for f, lo, hi in (("sample_size", 1, n_documents), ("sample_seed", 0, 2 ** 31 - 1)):
        raw = values[f].strip() or ("0" if f == "sample_seed" else "")
        try:
            ok = lo <= int(raw) <= hi
        except ValueError:
            ok = False
        if not ok:
            errors[f] = f"expected a whole number {lo}..{hi}, got {values[f]!r}"
    return errors


@require_POST
@organiser_required
def document_sample(request):
    """Draw (the next stage of) the exhaustive document sample with the chosen scheme."""
    corpus = _documents_corpus(request)
    values = {f: request.POST.get(f, "") for f in ("scheme", "sample_size", "sample_seed")}
    errors = _draw_errors(values, corpus.n_documents)
    if errors:  # each at its field, the values typed kept; nothing drawn
        return _documents_page(request, console_context(request, "documents"), 400, values=values, errors=errors)
    scheme, size, seed = values["scheme"], int(values["sample_size"]), int(values["sample_seed"] or 0)
    try:
        sample, made = sample_documents(corpus, scheme, size, seed=seed)
    except AnnotationError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{len(sample)} documents drawn ({scheme}), {made} new: one entity task each")
        warning = small_sample_warning(scheme, size, corpus.n_documents)
        if warning:
            messages.warning(request, warning)
    return redirect(_back("organiser:documents", corpus))
