"""The endpoints. Views stay thin: reads here, writes through :mod:`.actions`.

Visibility: anonymous callers see public submissions; a team also sees its private ones;
organisers see everything. A submission the caller may not see answers 404, as if absent.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from django.db.models import Count, Exists, OuterRef, Q, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from ninja import File, Form, Router, Schema, UploadedFile
from ninja.responses import Status
from pydantic import Field

from unpooled.core.json_text import finite
from unpooled.core.names import KB_FORMATS

from unpooled.service.accounts import actions as accounts
from unpooled.service.annotation.models import Label
from unpooled.service.corpora.models import Corpus, Document
from unpooled.service.corpora.names import public_source
from unpooled.service.evaluations.models import Draw, Score
from unpooled.service.submissions.models import RelationInstance, Submission
from unpooled.service.submissions.actions import stage_error
from unpooled.service.submissions.uploads import client_address

from . import actions, waiting
from .auth import OPTIONAL, OPTIONAL_EXTRA, REQUIRED, Caller, caller
from .errors import ApiError, rejection, report_diagnostics
from .schemas import (
    DESCRIPTION_RULE,
    CorpusDetailOut,
    CorpusPage,
    DocumentDetailOut,
    DocumentPage,
    EntityLeaderboardOut,
    EntityScoresOut,
    ErrorOut,
    LabelPage,
    LeaderboardOut,
    PairwiseOut,
    Level,
    PeriodIn,
    PeriodList,
    PeriodOut,
    MeOut,
    Stage,
    ProgressOut,
    SamplePage,
    ScorePage,
    ScoresOut,
    SubmissionDetailOut,
    SubmissionPage,
    SubmissionPatch,
    Text,
    UploadOut,
    Visibility,
)

router = Router()

Limit = Annotated[int, Field(ge=1, le=500, description="items per page")]
Offset = Annotated[int, Field(ge=0, le=1_000_000_000, description="items to skip")]
Wait = Annotated[int, Field(ge=0, le=300, description="seconds to wait for the validation to finish (the server "
                                                       "waits at most UNPOOLED_UPLOAD_WAIT_SECONDS, 5 by default; "
                                                       "poll again while not done)")]
PUBLISHED = Submission.Status.PUBLISHED


def errors(*statuses: int) -> dict:
    """Response declarations for error statuses (all share :class:`ErrorOut`)."""
    return {frozenset(statuses): ErrorOut} if statuses else {}


def _url(request: HttpRequest, name: str, *args) -> str:
    return request.build_absolute_uri(reverse(f"api:{name}", args=args))


def _page(request: HttpRequest, qs, limit: int, offset: int, row=None, *, items: list | None = None,
          **extra) -> dict:
    """One page of ``qs`` (``row`` makes each item; or the page's ``items`` made by the caller)."""
    count = qs.count()
    if items is None:
        items = [row(x) for x in qs[offset:offset + limit]]

    def link(off: int) -> str:
        q = request.GET.copy()
        q["offset"], q["limit"] = str(off), str(limit)
        return request.build_absolute_uri(f"{request.path}?{q.urlencode()}")

    return {"count": count, "limit": limit, "offset": offset,
            "next": link(offset + limit) if offset + limit < count else None,
            "previous": link(max(0, offset - limit)) if offset > 0 else None, "items": items, **extra}


def _corpus(name: str) -> Corpus:
    return actions.get_corpus(name)


def _submission(request: HttpRequest, pk: int) -> Submission:
    sub = Submission.objects.select_related("team", "corpus", "period").filter(pk=pk).first()
    if sub is None or not caller(request).can_view(sub):
        raise ApiError("not_found", detail=f"no submission with id {pk}")
    return sub


# ---------------------------------------------------------------------------- me

@router.get("/me", response={200: MeOut, **errors(401)}, auth=OPTIONAL, openapi_extra=OPTIONAL_EXTRA,
            tags=["accounts"], summary="The caller: user, role, team and its quota")
def me(request):
    c = caller(request)
    team = c.team
    tok = c.token
    return {
        "authenticated": c.authenticated, "via": c.via, "user": c.user.get_username() if c.authenticated else None,
        "role": c.role, "team": {"id": team.pk, "name": team.name} if team else None,
        "quota": accounts.quota(team).to_dict() if team else None,
        "token": {"name": tok.name, "prefix": tok.prefix, "created": tok.created.isoformat()} if tok else None,
    }


# ---------------------------------------------------------------------------- corpora

def _corpus_row(request, c: Corpus) -> dict:
    return {"name": c.name, "title": c.title, "schema_name": c.schema.name, "source_format": c.source_format,
            "n_documents": c.n_documents, "n_sentences": c.n_sentences, "n_gold_relations": c.n_gold_relations,
            "created": c.created, "url": _url(request, "corpus_detail", c.name)}


@router.get("/corpora", response={200: CorpusPage, **errors(400, 401)}, auth=OPTIONAL, openapi_extra=OPTIONAL_EXTRA,
            tags=["corpora"], summary="Corpora")
def corpus_list(request, limit: Limit = 50, offset: Offset = 0):
    qs = Corpus.objects.select_related("schema").order_by("name")
    return _page(request, qs, limit, offset, lambda c: _corpus_row(request, c))


@router.get("/corpora/{name}", response={200: CorpusDetailOut, **errors(401, 404)}, auth=OPTIONAL,
            openapi_extra=OPTIONAL_EXTRA, tags=["corpora"], summary="A corpus, with counts")
def corpus_detail(request, name: Text):
    from unpooled.service.evaluations.lifecycle import LifecycleError, levels_for

    c = _corpus(name)
    who = caller(request)
    subs = who.visible(Submission.objects.filter(corpus=c))
    try:
        levels = levels_for(c)
    except LifecycleError:
        levels = []
    counts = {"documents": c.n_documents, "sentences": c.n_sentences, "gold_relations": c.n_gold_relations,
              "submissions": subs.count(), "published": subs.filter(status=PUBLISHED).count()}
    if who.organiser:  # the pool holds private runs' labels too: its size tells of them (security review N14)
        counts["labels"] = Label.objects.filter(corpus=c).values("key_hash").distinct().count()
    return {**_corpus_row(request, c), "levels": levels, "counts": counts,
            "leaderboard_url": _url(request, "leaderboard", c.name),
            "documents_url": _url(request, "document_list", c.name)}


def _doc_row(request, c: Corpus, d: Document) -> dict:
    return {"id": d.pk, "doc_id": d.doc_id, "title": d.title, "length": d.length,
            "url": _url(request, "document_detail", c.name, d.doc_id)}


@router.get("/corpora/{name}/documents", response={200: DocumentPage, **errors(400, 401, 404)}, auth=OPTIONAL,
            openapi_extra=OPTIONAL_EXTRA, tags=["corpora"], summary="Documents of a corpus (search with q)")
def document_list(request, name: Text, q: Annotated[Text, Field(max_length=200)] = "", limit: Limit = 50,
                  offset: Offset = 0):
    c = _corpus(name)
    docs = c.documents.only("pk", "doc_id", "title", "length").order_by("pk")
    q = q.strip()
    if q:
        docs = docs.filter(Q(doc_id__icontains=q) | Q(title__icontains=q) | Q(text__icontains=q))
    return _page(request, docs, limit, offset, lambda d: _doc_row(request, c, d))


@router.get("/corpora/{name}/documents/{path:doc_id}", response={200: DocumentDetailOut, **errors(401, 404)},
            auth=OPTIONAL, openapi_extra=OPTIONAL_EXTRA, tags=["corpora"], summary="A document: text and sentences")
def document_detail(request, name: Text, doc_id: Text):
    c = _corpus(name)
    d = c.documents.filter(doc_id=doc_id).first()
    if d is None:
        raise ApiError("not_found", detail=f"corpus {c.name!r} has no document {doc_id!r}")
    return {**_doc_row(request, c, d), "text": d.text, "source": public_source(d.source),
            "sentences": [[s, e] for s, e in d.sentences.order_by("index").values_list("start", "end")]}


# ---------------------------------------------------------------------------- leaderboard and labels

EntityMetric = Literal["mention_p", "mention_r", "mention_f1", "typing", "link_p", "link_r", "link_f1", "nil_b3_p",
                       "nil_b3_r", "nil_b3_f1"]


def _score(s: Score, frozen=None, breakdown: dict | None = None) -> dict:
    out = finite({k: getattr(s, k) for k in (
        "id", "level", "estimator", "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi", "draws",
        "labels_new", "labels_reused", "exhaustive_documents", "recall_protocol", "details", "created")})
    out["frozen"] = frozen if frozen is not None else getattr(s, "frozen", None)
    out["breakdown"] = finite(breakdown)
    return out


def _scores(scores: list[Score]) -> list[dict]:
    """:func:`_score` of each of ``scores`` with its breakdown as whoever may see the submission sees it (the error
    analysis left out: :func:`unpooled.service.evaluations.breakdown.public`), the breakdowns read in one query."""
    from unpooled.service.evaluations.breakdown import public, stored_of

    bds = stored_of(scores)
    return [_score(s, breakdown=public(bds[s.pk])) for s in scores]


@router.get("/corpora/{name}/leaderboard", response={200: LeaderboardOut, **errors(400, 401, 404)}, auth=OPTIONAL,
            openapi_extra=OPTIONAL_EXTRA, tags=["evaluation"],
            summary="Published submissions ranked by F1 with tie groups (private ones: their team and organisers)")
def leaderboard(request, name: Text, level: Level = "instance",
                period: Annotated[int | None, Field(ge=1, le=1_000_000, description="one evaluation period's "
                                                    "submissions (and the human reference); omitted: all")] = None):
    """The same leaderboard as the page (computed by `unpooled.service.evaluations.leaderboard`, cached per viewer scope)."""
    from unpooled.service.evaluations.leaderboard import leaderboard as build

    c = _corpus(name)
    the_period = _period(c, period) if period is not None else None
    board = build(c, level=level, user=caller(request).user, period=the_period)
    rows = [{"rank": r["rank"], "tied": r["tied"], "rank_lo": r.get("rank_lo"), "rank_hi": r.get("rank_hi"),
             "better_than": r.get("better_than", []), "reference": r.get("reference", False), "period": r.get("period"),
             "frozen": r.get("frozen"), "name": r["name"], "submission": r["submission"].pk,
             "team": r["submission"].team.name, "run": r["submission"].run_id,
             "visibility": r["submission"].visibility, "url": _url(request, "submission_detail", r["submission"].pk),
             "score": _score(r["score"], r.get("frozen"))} for r in board["rows"]]
    return {"corpus": c.name, "level": level, "period": period, "recall_protocol": board["recall_protocol"],
            "rows": rows}


@router.get("/corpora/{name}/leaderboard/pairwise", response={200: PairwiseOut, **errors(400, 401, 404)},
            auth=OPTIONAL, openapi_extra=OPTIONAL_EXTRA, tags=["evaluation"],
            summary="Every pairwise difference of P, R or F1 between the leaderboard's systems, with simultaneous "
                    "intervals (the systems the viewer may see)")
def leaderboard_pairwise(request, name: Text, level: Level = "instance", metric: Literal["p", "r", "f1"] = "f1",
                         period: Annotated[int | None, Field(ge=1, le=1_000_000, description="one evaluation "
                                                             "period's submissions; omitted: all")] = None,
                         submission: Annotated[int | None, Field(ge=1, description="only the pairs of this "
                                                                 "submission")] = None):
    """The leaderboard's pairwise table (`unpooled.core.ranking.pairwise` on the covariances of the joint design):
    for every pair of systems on the viewer's board, the difference, its standard error and its interval, all
    intervals holding at once with 90% confidence, and which system is better when the data can tell.  The pairs
    are those of the board the viewer sees: another team's private submissions never appear."""
    from unpooled.service.evaluations.leaderboard import leaderboard as build
    from unpooled.service.evaluations.policy import CONFIDENCE

    c = _corpus(name)
    the_period = _period(c, period) if period is not None else None
    board = build(c, level=level, user=caller(request).user, period=the_period)
    pairs = board["pairs"][metric]
    if submission is not None:
        pairs = [p for p in pairs if submission in (p["a"], p["b"])]
    first = pairs[0] if pairs else {}
    return {"corpus": c.name, "level": level, "period": period, "metric": metric, "confidence": CONFIDENCE,
            "critical": first.get("critical"), "method": first.get("method"),
            "pairs": [finite({k: p[k] for k in ("a", "a_name", "b", "b_name", "diff", "se", "lo", "hi", "better")})
                      for p in pairs]}


# ---------------------------------------------------------------------------- evaluation periods

def _period(c: Corpus, number: int):
    from unpooled.service.evaluations import periods

    try:
        return periods.get_period(c, number)
    except periods.PeriodError as exc:
        raise ApiError(exc.code, detail=str(exc)) from None


def _period_call(fn, *args, **kwargs):
    from unpooled.service.evaluations import periods

    try:
        return fn(*args, **kwargs)
    except periods.PeriodError as exc:
        raise ApiError(exc.code, detail=str(exc)) from None


@router.get("/corpora/{name}/periods", response={200: PeriodList, **errors(400, 401, 404)}, auth=OPTIONAL,
            openapi_extra=OPTIONAL_EXTRA, tags=["periods"], summary="The corpus's evaluation periods, oldest first")
def period_list(request, name: Text):
    from unpooled.service.corpora.models import Period
    from unpooled.service.evaluations.periods import period_out

    c = _corpus(name)
    return {"corpus": c.name, "items": [period_out(p) for p in Period.objects.filter(corpus=c)
                                        .select_related("follows__corpus").order_by("number")]}


@router.post("/corpora/{name}/periods", response={201: PeriodOut, **errors(400, 401, 403, 404, 409, 413)},
             auth=REQUIRED, tags=["periods"],
             summary="Open an evaluation period (organisers): uploads from now on belong to it")
def period_open(request, name: Text, payload: PeriodIn):
    from unpooled.service.corpora.models import Corpus as CorpusModel
    from unpooled.service.evaluations import periods

    c = _corpus(name)
    follows = None
    if payload.follows_corpus or payload.follows_number is not None:
        _period_call(periods.check_organiser, caller(request).user)
        if not payload.follows_corpus or payload.follows_number is None:
            raise ApiError("invalid_request", detail="follows_corpus and follows_number: give both, or neither")
        prev = CorpusModel.objects.filter(name=payload.follows_corpus).first()
        if prev is None:
            raise ApiError("not_found", detail=f"follows_corpus: unknown corpus {payload.follows_corpus!r}")
        follows = _period(prev, payload.follows_number)
    p = _period_call(periods.do_open_period, caller(request).user, c, title=payload.title, follows=follows)
    return Status(201, periods.period_out(p))


@router.post("/corpora/{name}/periods/{int:number}/close", response={200: PeriodOut, **errors(401, 403, 404, 409)},
             auth=REQUIRED, tags=["periods"],
             summary="Close an evaluation period (organisers): its submissions' published scores are frozen")
def period_close(request, name: Text, number: int):
    from unpooled.service.evaluations import periods

    c = _corpus(name)
    _period_call(periods.check_organiser, caller(request).user)
    p = _period(c, number)
    _period_call(periods.do_close_period, caller(request).user, p)
    return periods.period_out(p)


@router.get("/corpora/{name}/periods/{int:number}/release", response={200: None, **errors(401, 403, 404, 409)},
            auth=REQUIRED, tags=["periods"],
            openapi_extra={"responses": {200: {"description": "the period's dataset release (a zip archive)",
                                                 "content": {"application/zip": {"schema": {
                                                     "type": "string", "format": "binary"}}}}}},
            summary="A closed period's annotated data as a dataset release (organisers; .zip)")
def period_release(request, name: Text, number: int):
    import tempfile

    from django.http import FileResponse

    from unpooled.service.evaluations import periods

    c = _corpus(name)
    _period_call(periods.check_organiser, caller(request).user)
    p = _period(c, number)
    out = tempfile.TemporaryFile()
    top, _ = _period_call(periods.do_release_period, caller(request).user, p, out)
    out.seek(0)
    return FileResponse(out, as_attachment=True, filename=top + ".zip", content_type="application/zip")


def _label(lab: Label) -> dict:
    return finite({k: getattr(lab, k) for k in ("id", "key", "correct", "probability", "method", "n_answers",
                                                  "guideline_version", "created")})


@router.get("/corpora/{name}/labels", response={200: LabelPage, **errors(400, 401, 403, 404)}, auth=REQUIRED,
            tags=["labels"], summary="The label pool of a corpus (organisers): the current label of every key")
def label_list(request, name: Text, method: Text = "", correct: bool | None = None, history: bool = False,
               limit: Limit = 100, offset: Offset = 0):
    """Labels are append-only; the newest label of a key is its current one. ``history=true`` lists every row."""
    c = _corpus(name)
    if not caller(request).organiser:
        raise ApiError("forbidden", detail="the label pool is for organisers; a team sees the labels of its own "
                                           "submissions at /api/submissions/{id}/labels")
    qs = Label.objects.filter(corpus=c)
    if method:
        qs = qs.filter(method=method)
    if not history:
        newer = Label.objects.filter(corpus=c, key_hash=OuterRef("key_hash"), key=OuterRef("key"),
                                     id__gt=OuterRef("id"))
        if method:
            newer = newer.filter(method=method)
        qs = qs.exclude(Exists(newer))
    if correct is not None:
        qs = qs.filter(correct=correct)
    return _page(request, qs.order_by("id"), limit, offset, _label)


# ---------------------------------------------------------------------------- submissions

def _sub_row(request, s: Submission) -> dict:
    return {"id": s.pk, "corpus": s.corpus.name, "team": s.team.name, "run": s.run_id, "format": s.format,
            "status": s.status, "visibility": s.visibility, "description": s.description, "link": s.link,
            "file_name": s.file_name,
            "file_size": s.file_size, "counts": s.counts, "created": s.created,
            "period": s.period.number if s.period_id else None, "reference": s.is_reference,
            "url": _url(request, "submission_detail", s.pk), "status_url": _url(request, "submission_status", s.pk),
            "scores_url": _url(request, "submission_scores", s.pk)}


def _sub_detail(request, s: Submission) -> dict:
    warn = report_diagnostics(s.warnings, path=s.file_name or "<input>") if s.warnings else []
    return {**_sub_row(request, s), "status_changed": s.status_changed, "failed_stage": s.failed_stage,
            "error": stage_error(s, manage=caller(request).can_manage(s)), "warnings": warn,
            "labels_url": _url(request, "submission_labels", s.pk)}


@router.get("/submissions", response={200: SubmissionPage, **errors(400, 401)}, auth=OPTIONAL,
            openapi_extra=OPTIONAL_EXTRA, tags=["submissions"], summary="Submissions you can see, newest first")
def submission_list(request, corpus: Text = "", team: Text = "", status: Stage | None = None,
                    visibility: Visibility | None = None, limit: Limit = 50, offset: Offset = 0):
    qs = caller(request).visible(Submission.objects.select_related("team", "corpus", "period"))
    if corpus:
        qs = qs.filter(corpus__name=corpus)
    if team:
        qs = qs.filter(team__name=team)
    if status:
        qs = qs.filter(status=status)
    if visibility:
        qs = qs.filter(visibility=visibility)
    return _page(request, qs.order_by("-created", "-id"), limit, offset, lambda s: _sub_row(request, s))


@router.get("/submissions/{int:pk}", response={200: SubmissionDetailOut, **errors(401, 404)}, auth=OPTIONAL,
            openapi_extra=OPTIONAL_EXTRA, tags=["submissions"], summary="A submission")
def submission_detail(request, pk: int):
    return _sub_detail(request, _submission(request, pk))


@router.patch("/submissions/{int:pk}", response={200: SubmissionDetailOut, **errors(400, 401, 403, 404, 409, 413)},
              auth=REQUIRED, tags=["submissions"],
              summary="Change a submission's visibility, description or paper/code link (its team, organisers)")
def submission_update(request, pk: int, payload: SubmissionPatch):
    c = caller(request)
    sub = Submission.objects.select_related("team", "corpus", "period").filter(pk=pk).first()
    if sub is None:
        raise ApiError("not_found", detail=f"no submission with id {pk}")
    actions.check_update_submission(c, sub, visibility=payload.visibility, description=payload.description,
                                    link=payload.link)
    actions.do_update_submission(sub, visibility=payload.visibility, description=payload.description,
                                 link=payload.link)
    return _sub_detail(request, sub)


class UploadIn(Schema):
    corpus: Text = Field(min_length=1, max_length=200, description="the corpus name")
    run: Text = Field("", max_length=200, description="run name (default: the TAC run id line, else the file name); "
                                                       "one alphabet, no control, invisible or direction-changing "
                                                       "character (400 otherwise)")
    format: Literal[("",) + KB_FORMATS] = Field("", description="tac or jsonl; detected when empty")  # type: ignore
    visibility: Visibility = "public"
    description: Text = Field("", max_length=10_000, description=DESCRIPTION_RULE)
    team: Text = Field("", max_length=100, description="organisers only: the team the run is for")


def _upload_out(request, result) -> tuple[dict, ApiError | None]:
    """The state of an upload (a task result) and, when it stored nothing, the error."""
    from django_tasks import TaskResultStatus

    args = list(result.args) + [None] * 9
    file_name, corpus, team = args[5] or "upload", args[1] or "", args[2] or ""
    out = {"upload": str(result.id), "file_name": file_name, "corpus": corpus, "team": team,
           "url": _url(request, "upload_detail", str(result.id)), "done": result.is_finished,
           "state": {TaskResultStatus.READY: "queued", TaskResultStatus.RUNNING: "validating"}.get(result.status,
                                                                                                  "validating")}
    err = None
    if result.status == TaskResultStatus.FAILED:
        what = result.errors[-1].exception_class_path if result.errors else "unknown error"
        err = ApiError("upload_failed", file=file_name, detail=what)  # the traceback stays in the worker's log
        out["state"] = "failed"
    elif result.status == TaskResultStatus.SUCCESSFUL:
        rv = result.return_value or {}
        if rv.get("ok"):
            pk = rv["submission"]
            rep = rv.get("report") or {}
            out.update(state="accepted", submission=pk, submission_url=_url(request, "submission_detail", pk),
                       status_url=_url(request, "submission_status", pk), duplicate=bool(rv.get("duplicate")),
                       counts=rv.get("counts") or {},
                       warnings=report_diagnostics({"warnings": rep.get("warnings", [])}, path=file_name))
        else:
            err = rejection(rv, file_name)
            out["state"] = "rejected"
    if err is not None:
        out["error"] = err.body()
    return out, err


def _sha256(file: UploadedFile) -> str:
    """The uploaded bytes' SHA-256, as the ingestion computes it of the stored copy (``chunks`` reads from the start)."""
    digest = hashlib.sha256()
    for chunk in file.chunks():
        digest.update(chunk)
    return digest.hexdigest()


def _wait(result, seconds: int, response: HttpResponse | None = None):
    """Wait for the validation (bounded: :mod:`.waiting`); an unfinished upload tells the client when to poll."""
    if seconds and not result.is_finished:
        result = waiting.wait_until_finished(result, seconds)
    if response is not None and not result.is_finished:
        response["Retry-After"] = str(waiting.POLL_SECONDS)
    return result


@router.post("/submissions", response={200: UploadOut, 201: UploadOut, 202: UploadOut,
                                       **errors(400, 401, 403, 404, 409, 413, 422, 429, 500, 507)},
             auth=REQUIRED, tags=["submissions"], summary="Submit a file (multipart): validated in the background",
             # an empty file is no submission (UP112), and no other field is taken: the schema says so
             openapi_extra={"requestBody": {"content": {"multipart/form-data": {"schema": {
                 "additionalProperties": False, "properties": {
                     "file": {"minLength": 1, "description": "the knowledge base (TAC or JSONL, gzip allowed)"}}}}}}})
def submission_create(request, response: HttpResponse, file: File[UploadedFile], data: Form[UploadIn],
                      wait: Wait = 0):
    """Answers 202 with the upload's id and URL (and ``Retry-After``); poll ``GET /api/uploads/{id}``. With
    ``wait`` (seconds; the server waits at most a few, see the API's description), answers when validation
    has finished within that time: 201 with the submission, or the error (422 with every located diagnostic
    for a rejected file; nothing is stored). A file your team submitted before answers 200 with that
    submission. Too many rejected or waiting uploads: 429 ``rate_limited``; no disk space left: 507 ``storage_full``."""
    c = caller(request)
    actions.check_upload_form(request.POST, request.FILES, request.GET, takes=set(UploadIn.model_fields))
    up = actions.check_upload(c, corpus=data.corpus, file_name=file.name, size=file.size, run=data.run,
                              fmt=data.format, visibility=data.visibility, description=data.description,
                              team=data.team, file_sha256=lambda: _sha256(file))
    result = actions.do_upload(up, file.chunks(), user=c.user, address=client_address(request),
                               limited=not c.organiser)
    result = _wait(result, wait, response)
    out, err = _upload_out(request, result)
    if err is not None:
        raise err
    if out["state"] == "accepted":
        resp = Status(200 if out["duplicate"] else 201, out)
    else:
        resp = Status(202, out)
    return resp


@router.get("/uploads/{upload_id}", response={200: UploadOut, **errors(400, 401, 404)}, auth=REQUIRED,
            tags=["submissions"], summary="An upload's validation: queued, validating, accepted, rejected or failed")
def upload_detail(request, response: HttpResponse, upload_id: Text, wait: Wait = 0):
    """Visible to the uploading team, the user who uploaded and organisers. ``wait``: seconds to wait for it to
    finish (the server waits at most a few; an unfinished upload answers with ``Retry-After``). A rejected
    upload carries the error with every located diagnostic (line, col, field, code, message, help).
    Outcomes are kept for ``UNPOOLED_UPLOAD_RESULT_HOURS`` (48 hours), then answer 404."""
    from unpooled.service.submissions.uploads import visible_upload

    c = caller(request)
    result = visible_upload(upload_id, user=c.user, team=c.team, organiser=c.organiser)
    if result is None:
        raise ApiError("not_found", detail=f"no upload with id {upload_id!r}")
    result = _wait(result, wait, response)
    return _upload_out(request, result)[0]


# ---------------------------------------------------------------------------- evaluation of a submission

@router.get("/submissions/{int:pk}/status", response={200: ProgressOut, **errors(401, 404)}, auth=OPTIONAL,
            openapi_extra=OPTIONAL_EXTRA, tags=["evaluation"],
            summary="Evaluation progress: stage, labels needed and received, cost, time left")
def submission_status(request, pk: int):
    from unpooled.service.evaluations.status import progress

    sub = _submission(request, pk)
    out = finite(progress(sub))
    out["error"] = stage_error(sub, manage=caller(request).can_manage(sub))
    return {**out, "url": _url(request, "submission_status", pk), "scores_url": _url(request, "submission_scores", pk)}


@router.get("/submissions/{int:pk}/scores", response={200: ScoresOut, **errors(401, 404)}, auth=OPTIONAL,
            openapi_extra=OPTIONAL_EXTRA, tags=["evaluation"], summary="The newest score per level")
def submission_scores(request, pk: int):
    from unpooled.service.evaluations.status import newest_scores

    sub = _submission(request, pk)
    newest = sorted(newest_scores(sub).items())
    return {"submission": sub.pk, "status": sub.status,
            "scores": dict(zip([lv for lv, _ in newest], _scores([s for _, s in newest])))}


def _entity(es) -> dict:
    from unpooled.service.evaluations.entities import api_dict

    return finite(api_dict(es))


@router.get("/submissions/{int:pk}/entity-scores", response={200: EntityScoresOut, **errors(401, 404)},
            auth=OPTIONAL, openapi_extra=OPTIONAL_EXTRA, tags=["evaluation"],
            summary="The newest entity scores: mention detection, typing, linking, NIL clustering")
def submission_entity_scores(request, pk: int):
    """Each metric with its 90% interval, or null and the reason it cannot be scored
    (computed by `unpooled.core.estimators.entities`)."""
    from unpooled.service.evaluations.entities import newest

    sub = _submission(request, pk)
    es = newest(sub)
    return {"submission": sub.pk, "status": sub.status, "entity_score": _entity(es) if es is not None else None}


@router.get("/corpora/{name}/leaderboard/entities", response={200: EntityLeaderboardOut, **errors(400, 401, 404)},
            auth=OPTIONAL, openapi_extra=OPTIONAL_EXTRA, tags=["evaluation"],
            summary="Published submissions ranked by an entity metric with tie groups")
def entity_leaderboard(request, name: Text, metric: EntityMetric = "mention_f1",
                       period: Annotated[int | None, Field(ge=1, le=1_000_000, description="one evaluation period's "
                                                           "submissions (and the human reference); omitted: all")]
                       = None):
    """The entity tab's board (`unpooled.service.evaluations.entities.leaderboard`); a submission of a closed period
    shows its frozen entity scores (``frozen``: when)."""
    from unpooled.service.evaluations.entities import leaderboard as build

    c = _corpus(name)
    the_period = _period(c, period) if period is not None else None
    board = build(c, metric=metric, user=caller(request).user, period=the_period)
    rows = [{"rank": r["rank"], "tied": r["tied"], "name": r["name"], "submission": r["entity"].submission.pk,
             "team": r["entity"].submission.team.name, "run": r["entity"].submission.run_id,
             "visibility": r["entity"].submission.visibility,
             "url": _url(request, "submission_detail", r["entity"].submission.pk),
             "frozen": r["frozen"], "entity_score": _entity(r["entity"])} for r in board["rows"]]
    return {"corpus": c.name, "metric": metric, "period": period, "rows": rows}


@router.get("/submissions/{int:pk}/scores/history", response={200: ScorePage, **errors(400, 401, 404)},
            auth=OPTIONAL, openapi_extra=OPTIONAL_EXTRA, tags=["evaluation"],
            summary="Every score of a submission, newest first")
def submission_score_history(request, pk: int, level: Level | None = None, limit: Limit = 50, offset: Offset = 0):
    sub = _submission(request, pk)
    qs = Score.objects.filter(submission=sub).order_by("-id")
    if level:
        qs = qs.filter(level=level)
    return _page(request, qs, limit, offset, items=_scores(list(qs[offset:offset + limit])))


@router.get("/submissions/{int:pk}/labels", response={200: SamplePage, **errors(400, 401, 403, 404)},
            auth=OPTIONAL, openapi_extra=OPTIONAL_EXTRA, tags=["labels"],
            summary="A submission's labelled sample: its drawn instances and their labels (its team, organisers)")
def submission_labels(request, pk: int, level: Level | None = None, errors_only: bool = False,
                      limit: Limit = 100, offset: Offset = 0):
    """``errors_only=true``: only the drawn instances labelled incorrect."""
    c: Caller = caller(request)
    sub = _submission(request, pk)
    if not c.can_manage(sub):
        if not c.authenticated:
            raise ApiError("unauthenticated")
        raise ApiError("forbidden", detail=f"the labelled sample of submission {pk} is for team {sub.team.name!r} "
                                           "and organisers")
    draws = Draw.objects.filter(submission=sub)
    if level:
        draws = draws.filter(level=level)
    newest = Label.objects.filter(corpus_id=sub.corpus_id, key_hash=OuterRef("key_hash"),
                                  key=OuterRef("key")).order_by("-id")
    qs = (RelationInstance.objects.filter(pk__in=Subquery(draws.values("instance_id")))
          .annotate(label_id=Subquery(newest.values("id")[:1]), label_correct=Subquery(newest.values("correct")[:1]))
          .order_by("line", "pk"))
    labelled = qs.filter(label_id__isnull=False).count()
    incorrect = qs.filter(label_correct=False).count()
    if errors_only:
        qs = qs.filter(label_correct=False)
    page = list(qs.select_related("document", "subject", "object")[offset:offset + limit])
    ids = [i.pk for i in page]
    labels = Label.objects.in_bulk([i.label_id for i in page if i.label_id])
    levels: dict[int, dict[str, int]] = {}
    for iid, lv, n in (draws.filter(instance_id__in=ids).values("instance_id", "level")
                       .annotate(n=Count("id")).values_list("instance_id", "level", "n")):
        levels.setdefault(iid, {})[lv] = n

    def row(i: RelationInstance) -> dict:
        text = i.document.text
        lab = labels.get(i.label_id) if i.label_id else None
        return {"instance": i.pk, "line": i.line, "document": i.document.doc_id, "predicate": i.predicate,
                "subject": text[i.subject_start:i.subject_end],
                "object": i.value if i.value is not None else text[i.object_start:i.object_end],
                "key": i.key, "levels": sorted(levels.get(i.pk, {})), "draws": sum(levels.get(i.pk, {}).values()),
                "label": _label(lab) if lab else None}

    return _page(request, qs, limit, offset, items=[row(i) for i in page], submission=sub.pk, labelled=labelled,
                 incorrect=incorrect)
