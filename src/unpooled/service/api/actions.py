"""Writes made through the API. ``check_*`` validates and authorises (raising :class:`ApiError`),
``do_*`` writes.

An upload is stored as a private file under ``settings.UPLOAD_DIR`` and validated by the same
background task as the web form (:func:`unpooled.service.submissions.tasks.ingest_upload`),
which stores the submission in one transaction or nothing at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from django.conf import settings

from unpooled.core.names import KB_FORMATS

from unpooled.service.accounts import actions as accounts
from unpooled.service.corpora.models import Corpus
from unpooled.service.corpora.periods import PeriodError, period_for_upload
from unpooled.service.submissions import uploads
from unpooled.service.submissions.models import Submission, Team

from .auth import Caller
from .errors import ApiError


@dataclass(frozen=True)
class Upload:
    """A checked upload request: what the task will be asked to do."""

    corpus: Corpus
    team: str
    run: str
    fmt: str
    visibility: str
    description: str
    file_name: str


def get_corpus(name: str) -> Corpus:
    corpus = Corpus.objects.select_related("schema").filter(name=name).first()
    if corpus is None:
        known = ", ".join(Corpus.objects.values_list("name", flat=True)[:50]) or "none yet"
        raise ApiError("not_found", detail=f"unknown corpus {name!r} (corpora: {known})")
    return corpus


def check_upload_form(fields, files, query, *, takes: set[str]) -> None:
    """A form field the upload does not take, or a field or file sent twice, is refused (400 naming it): a misspelt
    ``visibilty=private`` was ignored and the run stored public, and ``corpus`` sent twice was its last value; so is
    a query parameter but ``wait`` (``?visibility=private`` was ignored too).  ``takes``: the form's fields (Django's
    CSRF field is allowed too, for a browser's form)."""
    from .errors import diagnostic

    stray = sorted(k for k in query if k != "wait")
    if stray:
        raise ApiError("invalid_request", detail=f"query: the upload takes only 'wait' in its query, got "
                                                 f"{', '.join(map(repr, stray))} (send the upload's fields in its "
                                                 "form)",
                       diagnostics=[diagnostic("query", 0, "unknown_field", "the upload's query takes only 'wait'",
                                               field=k) for k in stray[:20]])

    unknown = sorted(k for k in fields if k not in takes and k != "csrfmiddlewaretoken")
    unknown += sorted(k for k in files if k != "file")
    if unknown:
        raise ApiError("invalid_request", detail=f"form: the upload takes no field {', '.join(map(repr, unknown))} "
                                                 f"(it takes {', '.join(sorted(takes | {'file'}))})",
                       diagnostics=[diagnostic("form", 0, "unknown_field", "the upload takes no such field", field=k)
                                    for k in unknown[:20]])
    twice = sorted(k for d in (fields, files) for k in d if len(d.getlist(k)) > 1)
    if twice:
        raise ApiError("invalid_request", detail=f"form: {', '.join(map(repr, twice))} sent twice; send each once",
                       diagnostics=[diagnostic("form", 0, "sent_twice", "sent twice", field=k) for k in twice[:20]])


def check_upload(caller: Caller, *, corpus: str, file_name: str, size: int, run: str = "", fmt: str = "",
                 visibility: str = "public", description: str = "", team: str = "",
                 file_sha256: Callable[[], str] | None = None) -> Upload:
    """Who submits for which team, and whether the request can be queued: corpus, size, run name, quota.

    The file itself is validated by the task; what can be told now is refused now.  ``file_sha256`` gives the
    uploaded bytes' digest, asked for only when the run name is taken: the team's own file sent again (a retry)
    goes on to the task, which answers its earlier submission, as the ingestion does whatever the run name.
    """
    if not caller.authenticated:
        raise ApiError("unauthenticated")
    own = caller.team
    team = (team or "").strip()
    if team and not caller.organiser and (own is None or team != own.name):
        raise ApiError("forbidden", detail=f"team: you submit for your own team"
                                           f"{' ' + repr(own.name) if own else ''}; only organisers name another "
                                           f"team, got {team!r}")
    team = team or (own.name if own else "")
    if not team:
        raise ApiError("no_team")
    the_corpus = get_corpus(corpus)
    try:  # refused now if no period is open (the ingestion decides the period when it stores the file)
        period_for_upload(the_corpus)
    except PeriodError as exc:
        raise ApiError(exc.code, detail=str(exc)) from None
    if visibility not in Submission.Visibility.values:
        raise ApiError("invalid_request", detail=f"visibility: expected one of "
                                                 f"{', '.join(Submission.Visibility.values)}, got {visibility!r}")
    if fmt and fmt not in KB_FORMATS:
        raise ApiError("invalid_request", detail=f"format: expected one of {', '.join(KB_FORMATS)} (or nothing, to "
                                                 f"detect), got {fmt!r}")
    if "\x00" in (file_name or ""):
        raise ApiError("invalid_request", detail="file: the file name contains a NUL character (U+0000)")
    limit = settings.LIMITS.max_bytes
    if size > limit:
        raise ApiError("too_large", limit=limit)
    run = (run or "").strip()
    if len(run) > 200:
        raise ApiError("invalid_request", detail=f"run: at most 200 characters, got {len(run)}")
    from unpooled.service.submissions.names import description_problem, name_problem

    why = (name_problem(run, "run") if run else None) or description_problem(description)
    if why:
        raise ApiError("invalid_request", detail=why)
    the_team = Team.objects.filter(name=team).first()
    if run and the_team is not None and Submission.objects.filter(corpus=the_corpus, team=the_team,
                                                                  run_id=run).exists() and not (
            file_sha256 is not None and Submission.objects.filter(corpus=the_corpus, team=the_team,
                                                                  file_sha256=file_sha256()).exists()):
        raise ApiError("duplicate_run", detail=f"team {team!r} already has a run named {run!r} on corpus "
                                               f"{the_corpus.name!r}; choose another run name")
    if the_team is not None:
        accounts.check_quota(the_team)  # AccountError, 429
    return Upload(the_corpus, team, run, fmt, visibility, (description or "").strip(), file_name or "upload")


def do_upload(upload: Upload, chunks, *, user=None, address: str | None = None, limited: bool = True):
    """Save the uploaded bytes (a private file) and queue their validation; returns the task result (the upload's
    id). ``limited``: the limits on rejected and waiting uploads apply (429 ``rate_limited``; not to organisers).
    """
    dest = uploads.save_upload(chunks)
    return uploads.start_upload(dest, corpus=upload.corpus.name, team=upload.team, run=upload.run, fmt=upload.fmt,
                                file_name=upload.file_name, visibility=upload.visibility,
                                description=upload.description, user=user, address=address, limited=limited)


def check_update_submission(caller: Caller, sub: Submission, *, visibility: str | None,
                            description: str | None, link: str | None = None) -> None:
    if not caller.can_view(sub):
        raise ApiError("not_found", detail=f"no submission with id {sub.pk}")
    if not caller.authenticated:
        raise ApiError("unauthenticated")
    if not caller.can_manage(sub):
        raise ApiError("forbidden", detail=f"only team {sub.team.name!r} and organisers can change submission "
                                           f"{sub.pk}")
    if visibility is not None and visibility not in Submission.Visibility.values:
        raise ApiError("invalid_request", detail=f"visibility: expected one of "
                                                 f"{', '.join(Submission.Visibility.values)}, got {visibility!r}")
    from unpooled.service.submissions.actions import visibility_problem
    from unpooled.service.submissions.names import description_problem

    why = visibility_problem(sub, visibility, organiser=caller.organiser)
    if why:
        raise ApiError("conflict", detail=why)
    why = description_problem(description)
    if why:
        raise ApiError("invalid_request", detail=why)
    if link is not None:
        from unpooled.service.submissions.actions import link_problem

        why = link_problem(link)
        if why:
            raise ApiError("invalid_request", detail=f"link: {why}")


def do_update_submission(sub: Submission, *, visibility: str | None = None,
                         description: str | None = None, link: str | None = None) -> Submission:
    """Change what the team may change (``None``: leave it): :func:`unpooled.service.submissions.actions.
    do_update_submission`; the caller has checked who asks and the values (:func:`check_update_submission`)."""
    from unpooled.service.submissions.actions import do_update_submission as update

    return update(sub, visibility=visibility, description=description, link=link)
