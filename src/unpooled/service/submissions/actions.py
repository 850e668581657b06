"""Submitting, storing and exporting knowledge bases.

``check_submission`` validates a file against a stored corpus without writing;
``do_ingest_submission`` validates and then stores it in one transaction, so a
rejected or crashed import leaves no rows.  The same file (by SHA-256) submitted again
by the same team is recognised and returns that team's existing submission; another
team's identical file is stored as that team's own run (nothing about the first team's
submission is ever told to another team).
"""

from __future__ import annotations

import hashlib
import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction

from unpooled.core.diagnostics import Report
from unpooled.core.kb import KB, detect_kb_format, read_kb, write_jsonl, write_tac
from unpooled.core.kb.model import Entity, Instance, Mention, key_hash
from unpooled.service.corpora.actions import ActionError, get_corpus
from unpooled.service.corpora.corpus_view import DbCorpusView
from unpooled.service.corpora.models import Corpus
from unpooled.service.corpora.periods import PeriodError, period_for_upload

from .models import REFERENCE_TEAM, RelationInstance, Submission, SubmissionEntity, SubmissionMention, Team

log = logging.getLogger(__name__)


@dataclass
class IngestResult:
    report: Report
    submission: Submission | None = None
    duplicate_of: Submission | None = None
    seconds: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.submission is not None

    def to_dict(self) -> dict:
        out = {"ok": self.ok, "report": self.report.to_dict()}
        sub = self.submission
        if sub is not None:
            out.update(submission=sub.pk, team=sub.team.name, run=sub.run_id, corpus=sub.corpus.name,
                       counts=sub.counts, duplicate=self.duplicate_of is not None)
        return out


NUL = "\x00"


def _no_nul(v):
    """A report's dict with NUL characters shown as U+FFFD (a database text or JSON column refuses them)."""
    if isinstance(v, str):
        return v.replace(NUL, "\ufffd")
    if isinstance(v, dict):
        return {k: _no_nul(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_no_nul(x) for x in v]
    return v


def _reject_nul(kb: KB, report: Report, run_id: str | None) -> bool:
    """A NUL character (U+0000, from a JSON ``\\u0000``) in a name, link, value or run id cannot be stored: each
    one is an error at its line (UP107); a run id readers would not see as written (a control or invisible
    character, mixed alphabets: security review N10) is one at line 1 (UP104); returns whether there was any."""
    n = report.n_errors
    help_ = "remove the NUL character (U+0000): names, links and values are text"
    if NUL in (run_id or "") or NUL in (kb.run_id or ""):
        report.add(1, "UP104", "the run id contains a NUL character (U+0000)", help=help_)
    else:
        from .names import name_problem

        why = next(filter(None, (name_problem(r, "the run id") for r in (run_id, kb.run_id) if r)), None)
        if why:
            report.add(1, "UP104", why, help="a run id is plain text in one alphabet: letters, digits, punctuation")
    for e in kb.entities.values():
        for what, v in (("entity name", e.name), ("entity type", e.type or ""), *(("link", x) for x in e.links)):
            if NUL in v:
                report.add(e.line, "UP107", f"{what} contains a NUL character (U+0000)", field=what.split()[-1],
                           text=v.replace(NUL, "\ufffd"), help=help_)
    for m in kb.mentions:
        if NUL in m.kind:
            report.add(m.line, "UP107", "mention kind contains a NUL character (U+0000)", field="kind", help=help_)
    for i in kb.instances:
        if NUL in (i.value or ""):
            report.add(i.line, "UP107", "value contains a NUL character (U+0000)", field="value",
                       text=i.value.replace(NUL, "\ufffd"), help=help_)
    return report.n_errors > n


def _same_file(corpus: Corpus, team_name: str, sha: str) -> Submission | None:
    """The team's own submission of the same bytes to the corpus (never another team's)."""
    return (Submission.objects.filter(corpus=corpus, team__name=team_name, file_sha256=sha)
            .select_related("team", "corpus").first())


def _duplicate(existing: Submission, path: str | Path) -> IngestResult:
    rep = Report(path=str(path))
    rep.counts = dict(existing.counts)
    return IngestResult(rep, existing, duplicate_of=existing)


def file_sha256(path: str | Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def check_submission(path: str | Path, corpus: Corpus, fmt: str | None = None,
                     *, view: DbCorpusView | None = None) -> tuple[KB | None, Report]:
    """Parse and validate ``path`` against a stored corpus and its schema (no writes)."""
    fmt = fmt or detect_kb_format(path)
    view = view or DbCorpusView(corpus)
    return read_kb(path, view, corpus.schema.schema(), fmt=fmt, path=str(path), limits=settings.LIMITS)


def _check_names(team_name: str, description: str) -> None:
    """A new team's name and the description: nothing readers would not see as written (submissions/names.py)."""
    from .names import description_problem, new_team_problem

    why = (None if Team.objects.filter(name=team_name).exists() else new_team_problem(team_name)) or \
        description_problem(description)
    if why:
        raise ActionError(why)


def do_ingest_submission(
    path: str | Path, corpus_name: str, team_name: str, run_id: str | None = None, fmt: str | None = None,
    *, file_name: str | None = None, timer: Callable[[str], None] | None = None,
    enforce_quota: bool = False, visibility: str = "public", submitted_by=None, description: str = "",
    start: bool = False,
) -> IngestResult:
    """Validate and store a submission; nothing is written unless the file is accepted whole.

    ``enforce_quota``: refuse when the team has used its quota (uploads by web and API; the
    organiser's command line does not count against quotas).  ``start``: enqueue the
    evaluation lifecycle (:mod:`unpooled.service.evaluations.lifecycle`) once stored.
    """
    if visibility not in Submission.Visibility.values:
        raise ActionError(f"visibility: expected one of {', '.join(Submission.Visibility.values)}, got {visibility!r}")
    corpus = get_corpus(corpus_name)
    if not team_name or not team_name.strip():
        raise ActionError("a team name is required (--team)")
    team_name = team_name.strip()
    if team_name.casefold() == REFERENCE_TEAM.casefold():
        raise ActionError(f"team {REFERENCE_TEAM!r} is reserved for the human reference; name another team")
    _check_names(team_name, description)
    sha, size = file_sha256(path)
    existing = _same_file(corpus, team_name, sha)
    if existing is not None:
        return _duplicate(existing, path)
    view = DbCorpusView(corpus)
    kb, report = check_submission(path, corpus, fmt, view=view)
    if timer:
        timer("validate")
    if kb is None:
        return IngestResult(report)
    if _reject_nul(kb, report, run_id):
        return IngestResult(report)
    run = (run_id or kb.run_id or Path(file_name or path).name).strip()
    fmt = kb.format
    try:
        with transaction.atomic():
            team, _ = Team.objects.get_or_create(name=team_name)
            if enforce_quota:
                from .quota import check_quota

                Team.objects.select_for_update().filter(pk=team.pk).first()  # one quota check at a time per team
                check_quota(team)
            if Submission.objects.filter(corpus=corpus, team=team, run_id=run).exists():
                raise ActionError(
                    f"team {team.name!r} already has a run named {run!r} on corpus {corpus.name!r}; choose another --run"
                )
            try:  # the evaluation period open now, decided here, server-side (corpora/periods.py)
                period = period_for_upload(corpus, lock=True)
            except PeriodError as exc:
                raise ActionError(str(exc)) from None
            sub = Submission.objects.create(
                period=period,
                corpus=corpus, team=team, run_id=run, format=fmt, file_name=file_name or Path(path).name,
                file_sha256=sha, file_size=size, counts=dict(report.counts),
                warnings=_no_nul(report.to_dict()) if report.n_warnings else {},
                visibility=visibility, submitted_by=submitted_by, description=description,
            )
            store_kb(sub, kb, view)
            if start:
                from .signals import submission_stored

                submission_stored.send(sender=Submission, submission=sub)  # the evaluations app starts it
    except IntegrityError:  # a concurrent upload of the same file or run name by the same team
        log.warning("storing %s for team %r on %s raced another upload", file_name or path, team_name, corpus.name,
                    exc_info=True)
        existing = _same_file(corpus, team_name, sha)
        if existing is not None:
            return _duplicate(existing, path)
        if Submission.objects.filter(corpus=corpus, team__name=team_name, run_id=run).exists():
            raise ActionError(f"team {team_name!r} already has a run named {run!r} on corpus {corpus.name!r}; "
                              "choose another --run") from None
        raise ActionError("submission conflicts with one stored at the same time; upload it again") from None
    if timer:
        timer("store")
    return IngestResult(report, sub)


# -- bulk storage -------------------------------------------------------------
ENTITY_COLS = ("submission_id", "name", "type", "links")
MENTION_COLS = ("submission_id", "entity_id", "document_id", "start", "end", "kind", "canonical", "confidence")
INSTANCE_COLS = (
    "submission_id", "document_id", "predicate", "subject_id", "subject_start", "subject_end", "object_id",
    "object_start", "object_end", "value", "provenance", "confidence", "line", "key", "key_hash",
)


def format_provenance(spans) -> str:
    return ";".join(f"{s}-{e}" for s, e in spans)


def parse_provenance(text: str) -> tuple[tuple[int, int], ...]:
    return tuple(tuple(int(x) for x in part.split("-")) for part in text.split(";") if part)  # type: ignore[misc]


def _bulk_insert(table: str, cols: tuple[str, ...], rows) -> int:
    """Insert rows fast: COPY on PostgreSQL (binary, typed by the table's columns), executemany elsewhere."""
    n = 0
    q = connection.ops.quote_name
    qcols = ", ".join(q(c) for c in cols)
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            from psycopg.postgres import types as pg_types

            # binary: the server parses no text (every column is a number, a string, a flag or NULL); a jsonb
            # column (an entity's links, as JSON text) stays in the text format
            cur.execute("SELECT attname, atttypid::int FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                        "AND NOT attisdropped", [q(table)])
            oids = dict(cur.fetchall())
            types = [oids[c] for c in cols]
            binary = pg_types["jsonb"].oid not in types
            with cur.cursor.copy(f"COPY {q(table)} ({qcols}) FROM STDIN" + (" (FORMAT BINARY)" if binary else "")) as cp:
                if binary:
                    cp.set_types(types)
                for row in rows:
                    cp.write_row(row)
                    n += 1
        else:
            sql = f"INSERT INTO {q(table)} ({qcols}) VALUES ({', '.join(['%s'] * len(cols))})"
            buf = []
            for row in rows:
                buf.append(row)
                if len(buf) >= 10000:
                    cur.executemany(sql, buf)
                    n += len(buf)
                    buf = []
            if buf:
                cur.executemany(sql, buf)
                n += len(buf)
    return n


#: SQLite's page cache while a submission is stored (KiB): its indexes' pages stay in memory instead of being
#: spilled to the write-ahead log and read back (the connection's own size, 2 MiB by default, is put back after)
SQLITE_BULK_CACHE_KIB = 64 * 1024


@contextmanager
def _bulk_cache():
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cur:
        cur.execute("PRAGMA cache_size")
        (before,), = cur.fetchall()
        cur.execute(f"PRAGMA cache_size = {-SQLITE_BULK_CACHE_KIB:d}")
        try:
            yield
        finally:
            try:
                cur.execute(f"PRAGMA cache_size = {int(before):d}")
            except DatabaseError:  # a broken connection: the error that broke it is the one to tell
                log.warning("could not put SQLite's cache size back", exc_info=True)


def store_kb(sub: Submission, kb: KB, view: DbCorpusView) -> None:
    """Write entities, mentions and instances of ``kb`` under ``sub`` (inside the caller's transaction)."""
    with _bulk_cache():
        _store_rows(sub, kb, view)


def _store_rows(sub: Submission, kb: KB, view: DbCorpusView) -> None:
    sid = sub.pk
    _bulk_insert(
        SubmissionEntity._meta.db_table, ENTITY_COLS,
        ((sid, e.name, e.type, json.dumps(e.links)) for e in kb.entities.values()),
    )
    ent_ids = dict(SubmissionEntity.objects.filter(submission=sub).values_list("name", "pk"))
    pk = view.pk
    _bulk_insert(
        SubmissionMention._meta.db_table, MENTION_COLS,
        ((sid, ent_ids[m.entity], pk(m.doc), m.start, m.end, m.kind, m.canonical, m.confidence) for m in kb.mentions),
    )

    def inst_rows():
        for i in kb.instances:
            k = i.key
            yield (
                sid, pk(i.doc), i.predicate, ent_ids[i.subject], i.subject_start, i.subject_end,
                ent_ids[i.object] if i.object is not None else None, i.object_start, i.object_end, i.value,
                format_provenance(i.provenance), i.confidence, i.line, k, key_hash(k),
            )

    _bulk_insert(RelationInstance._meta.db_table, INSTANCE_COLS, inst_rows())


# -- reading back ---------------------------------------------------------------
def _stored_kb(sub: Submission):
    """The stored submission's entities (name -> :class:`Entity`, in memory) and its mentions and instances as
    iterators over the database, a few thousand rows at a time: an export streams them (:func:`export_submission`),
    :func:`load_kb` keeps them."""
    entities, names = {}, {}
    for pk, name, type_, links in SubmissionEntity.objects.filter(submission=sub).order_by("pk").values_list(
        "pk", "name", "type", "links"
    ).iterator(chunk_size=5000):
        names[pk] = name
        entities[name] = Entity(name, type_, list(links or []))
    docs = dict(sub.corpus.documents.values_list("pk", "doc_id"))
    mentions = (Mention(names[ent], docs[doc], s, e, kind, canonical, conf)
                for ent, doc, s, e, kind, canonical, conf in SubmissionMention.objects.filter(submission=sub).order_by(
                    "entity_id", "pk").values_list("entity_id", "document_id", "start", "end", "kind", "canonical",
                                                   "confidence").iterator(chunk_size=5000))
    instances = (Instance(docs[d], names[s], ss, se, p, names.get(o), os_, oe, v, parse_provenance(prov), conf, line)
                 for d, s, ss, se, p, o, os_, oe, v, prov, conf, line in RelationInstance.objects.filter(
                     submission=sub).order_by("pk").values_list(
                     "document_id", "subject_id", "subject_start", "subject_end", "predicate", "object_id",
                     "object_start", "object_end", "value", "provenance", "confidence", "line").iterator(
                     chunk_size=5000))
    return entities, mentions, instances


def load_kb(sub: Submission) -> KB:
    """The stored submission as an in-memory :class:`~unpooled.core.kb.KB`."""
    entities, mentions, instances = _stored_kb(sub)
    kb = KB(run_id=sub.run_id, format=sub.format)
    kb.entities.update(entities)
    kb.mentions.extend(mentions)
    kb.instances.extend(instances)
    return kb


def get_submission(pk: int) -> Submission:
    try:
        return Submission.objects.select_related("corpus", "team", "corpus__schema").get(pk=pk)
    except (Submission.DoesNotExist, ValueError):
        raise ActionError(f"no submission with id {pk!r}") from None


def export_submission(sub: Submission, fmt: str, out: TextIO) -> int:
    """Write a stored submission in ``tac`` or ``jsonl`` format; returns lines written.  Mentions and instances
    are streamed from the database (:func:`_stored_kb`): the memory an export takes is its entities', not the KB's."""
    if fmt not in ("jsonl", "tac"):
        raise ActionError(f"unknown export format {fmt!r}; use tac or jsonl")
    entities, mentions, instances = _stored_kb(sub)
    if fmt == "jsonl":
        return write_jsonl(out, entities, instances)
    view = DbCorpusView(sub.corpus)
    return write_tac(out, sub.run_id, entities.values(), mentions, instances, lambda d, s, e: view.text(d)[s:e])


# -- what a failure may tell ---------------------------------------------------

#: what anyone else is told about a failed stage (the cause is an exception's text: it may quote the database)
STAGE_ERROR_HIDDEN = "the cause is shown to the submitting team and the organisers"


def stage_error(sub, *, manage: bool) -> str:
    """Why the submission's failed stage failed: the recorded cause for its team and organisers (``manage``),
    a fixed sentence for anyone else who may view it."""
    if not sub.error:
        return ""
    return sub.error if manage else STAGE_ERROR_HIDDEN


#: the longest paper/code link a submission keeps (the web form's and the API's limit)
LINK_MAX = 500
#: what a paper/code link may be: empty, or http(s):// and printable ASCII without space, quote or angle bracket
#: (the API declares this pattern in its schema; a non-ASCII address is sent percent-encoded)
LINK_PATTERN = r"^(https?://[!#-;=?-~]+)?$"


def link_problem(link: str) -> str:
    """Why ``link`` cannot be a submission's paper/code link ('' when it can: :data:`LINK_PATTERN`, at most
    :data:`LINK_MAX` characters, surrounding blanks ignored); one check for the web form and the API."""
    import re

    link = link.strip()
    if len(link) > LINK_MAX:
        return f"at most {LINK_MAX} characters, got {len(link)}"
    if not re.fullmatch(LINK_PATTERN, link):
        return (f"expected an http:// or https:// address of printable ASCII characters without spaces, quotes "
                f"or angle brackets, got {link[:80]!r}")
    return ""


def visibility_problem(sub: Submission, visibility: str | None, *, organiser: bool) -> str | None:
    """Why ``sub``'s visibility may not become ``visibility`` (``None``: it may).  A run of a closed evaluation
    period keeps its visibility (organisers excepted): its scores are frozen, and a team that could reveal a private
    run afterwards would keep several and reveal the best (security review N11)."""
    if visibility is None or visibility == sub.visibility or organiser or sub.period_id is None:
        return None
    period = sub.period
    if period.closed is None:
        return None
    return (f"submission {sub.pk} belongs to evaluation period {period.number}, which closed on "
            f"{period.closed:%Y-%m-%d %H:%M} UTC: its visibility stays {sub.visibility} (its scores are frozen); "
            "the organisers can change it")


def do_update_submission(sub: Submission, *, visibility: str | None = None, description: str | None = None,
                         link: str | None = None) -> Submission:
    """Change a submission's visibility, description or paper/code link (``None``: leave it) and its ``updated``
    time (the leaderboard's and the page's caches see it); the caller has checked who asks and the values
    (the API's ``check_update_submission``, the web page's form)."""
    from django.utils import timezone

    fields = {}
    if visibility is not None:
        fields["visibility"] = visibility
    if description is not None:
        fields["description"] = description.strip()
    if link is not None:
        fields["link"] = link.strip()
    if fields:
        fields["updated"] = timezone.now()
        Submission.objects.filter(pk=sub.pk).update(**fields)
        for k, v in fields.items():
            setattr(sub, k, v)
    return sub
