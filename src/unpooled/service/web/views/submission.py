"""A submission's page: its scores, breakdowns, errors, instances and downloads.

Who sees what: a private submission is 404 for everyone but its team and the organisers
(``can_view``); the scores and the breakdowns are for whoever can view it; the error analysis
(wrong sampled instances, missed gold instances) and the labelled sample are for the team and
the organisers (``can_manage``; others who can view get 403).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import tempfile
from datetime import datetime, timezone

from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe

from unpooled.core.names import KB_FORMATS

from unpooled.service.accounts.actions import can_manage, can_view
from unpooled.service.corpora.models import Corpus
from unpooled.service.corpora.names import relation_names
from unpooled.service.web.forms import SubmissionSettingsForm
from unpooled.service.evaluations.models import ENTITY_SCORES
from unpooled.service.evaluations.policy import SERVICE_LEVELS as LEVELS
from unpooled.service.submissions.actions import export_submission
from unpooled.service.submissions.models import RelationInstance, Submission

from ..csv_download import csv_response
from ..page_cache import anonymous_reader, whole_page

log = logging.getLogger(__name__)
ERRORS_PER_PAGE = 10
MISSED_PER_PAGE = 10
CHART_ROWS = 15


def _submission(request, pk: int, *, manage: bool = False) -> Submission:
    sub = get_object_or_404(Submission.objects.select_related("team", "corpus"), pk=pk)
    if not can_view(request.user, sub):
        raise Http404("no such submission")
    if manage and not can_manage(request.user, sub):
        raise PermissionDenied("only the submitting team and the organisers see the labelled sample")
    return sub


def _page_links(request, param: str, page, anchor: str) -> dict:
    def url(n):
        q = request.GET.copy()
        q[param] = n
        return f"?{q.urlencode()}#{anchor}"

    return {"page": page, "prev": url(page.previous_page_number()) if page.has_previous() else None,
            "next": url(page.next_page_number()) if page.has_next() else None}


def _chart(rows: list[dict], title: str) -> str:
    """F1 with its interval per group: the :data:`CHART_ROWS` groups with most instances that have enough labelled
    draws and true instances for an interval (rows come sorted by instances), named by code and description."""
    from unpooled.core.plots.svg import interval_chart

    shown = [r for r in rows if r.get("f1") is not None and r.get("n_draws") and not r.get("f1_few")][:CHART_ROWS]
    if not shown:
        return ""
    names = [f"{r['group']} {r['description']}"[:34] if r.get("description") else r["group"] for r in shown]
    return interval_chart(names, [r["f1"] for r in shown], [r["f1_lo"] for r in shown],
                          [r["f1_hi"] for r in shown], title=title, value_label="F1", series_label="F1",
                          value_range=(0.0, 1.0), width=560)


def _breakdown_html(score, bd: dict, levels: list[str]) -> str:
    """The breakdown sections of a score, rendered once and cached: a score's breakdown never changes."""
    from unpooled.core.estimators.breakdown import MIN_EFFECTIVE
    from unpooled.service.evaluations.breakdown import VERSION

    def build():
        level = score.level
        return render_to_string("web/submission_breakdown.html", {
            "bd": bd, "level": level, "levels": levels, "min_effective": MIN_EFFECTIVE,
            "relation_svg": _chart(bd["relation"], f"F1 by relation, the {CHART_ROWS} largest ({level} level)"),
            "type_svg": _chart(bd["entity_type"], f"F1 by subject type ({level} level)")})

    key = f"unpooled:breakdown-html:v{VERSION}.{TEMPLATE_VERSION}:{score.pk}:{bd.get('computed', '')}:{','.join(levels)}"
    return mark_safe(cache.get_or_set(key, build, timeout=24 * 3600))


def _context_html(row: dict) -> str:
    """The highlighted context of an error or missed row: subject and object marked, provenance underlined."""
    parts = ["… "] if row.get("cut_left") else []
    for seg in row["segments"]:
        t = str(escape(seg.text))
        if seg.role in ("subj", "obj"):
            t = f'<mark class="{seg.role}">{t}</mark>'
        elif seg.role == "gap":
            t = f'<span class="muted">{t}</span>'
        if seg.prov:
            t = f'<span class="prov">{t}</span>'
        parts.append(t)
    if row.get("cut_right"):
        parts.append(" …")
    return mark_safe('<span class="ctx">' + "".join(parts) + "</span>")


def _status_url(sub: Submission) -> str | None:
    try:
        return reverse("web:status", args=[sub.pk])
    except NoReverseMatch:
        return None


#: how long a rendered submission page lives in the cache: a new score, a change of the submission
#: (visibility, description, status) or a new breakdown version gives it a new key anyway; the team's
#: view (error analysis: the labels) is kept shorter, as labels may change before the next score
PAGE_SECONDS = 24 * 3600
MANAGE_PAGE_SECONDS = 60
#: part of every cache key of a rendered page or breakdown: a change of the templates gives new keys
TEMPLATE_VERSION = 6

#: what the validation's counts are called on the page (others: their key with spaces)
COUNT_LABELS = {"instances": "instances stored", "lines": "lines read", "documents": "documents",
                "string_instances": "instances with a string value (no object entity)",
                "inverses_merged": "inverse relations turned into their canonical direction",
                "duplicates_dropped": "duplicate instances dropped", "entities": "entities", "mentions": "mentions"}


def _newest_ids(sub: Submission) -> dict[str, int | str]:
    """The newest score id per level (a frozen level: its snapshot's score, ``"<id>f"``: the key says "frozen at")
    and the newest entity score's id (under ``~entities``, a key no level has; its frozen one under ``entities``), for
    the page's cache key: one query over the (submission, level, id) indexes, no model instances."""
    from django.db import connection

    from unpooled.service.evaluations.models import EntityScore, Score, ScoreSnapshot

    score, snap, ent = Score._meta.db_table, ScoreSnapshot._meta.db_table, EntityScore._meta.db_table
    sql = (f'SELECT 0, level, MAX(id) FROM "{score}" WHERE submission_id = %s GROUP BY level '
           f'UNION ALL SELECT 1, level, COALESCE(score_id, entity_score_id) FROM "{snap}" WHERE submission_id = %s '
           f'UNION ALL SELECT 2, \'~entities\', MAX(id) FROM "{ent}" WHERE submission_id = %s')
    with connection.cursor() as cur:
        cur.execute(sql, [sub.pk, sub.pk, sub.pk])
        rows = sorted(cur.fetchall(), key=lambda r: r[0])
    out: dict[str, int | str] = {}
    for kind, level, i in rows:
        if i is not None:
            out[level] = f"{i}f" if kind == 1 else i
    return out


def asked_pages(params, *, manage: bool) -> dict[str, int]:
    """The page numbers a request asks for, of the sections the viewer sees (the error analysis is the team's), as
    numbers: anything but a plain positive number is page 1, as the paginator reads it.  The cache key is made of
    these, so ``?page=1x`` is no new render (security review N6: every distinct raw value was a render and a cache
    entry kept a day)."""
    out = {}
    for k in ("page", "errors_page", "missed_page") if manage else ("page",):
        v = str(params.get(k, ""))
        out[k] = int(v) if v.isascii() and v.isdigit() and len(v) <= 6 and int(v) > 0 else 1
    return out


def page_key(sub: Submission, newest: dict[str, int], *, manage: bool, level: str | None, params, board: str = ""
             ) -> str:
    """The cache key of a rendered submission page: what it shows depends on nothing else.

    The newest score of each level (a score and its stored breakdown never change once the
    breakdown is there; pages without it are not cached), the submission's stage, visibility and last
    changes (``updated``, ``status_changed``: also when a bulk update bypassed ``updated``), who
    looks (the team's view adds the error analysis), the level and the three page numbers; ``board``: the cache
    key of the viewer's leaderboard at the level (the comparison with the leader and the previous run follows it).
    """
    from unpooled.service.evaluations.breakdown import VERSION

    scores = ",".join(f"{lv}{i}" for lv, i in sorted(newest.items()))
    pages = ":".join(f"{k}{n}" for k, n in asked_pages(params, manage=manage).items())
    stamp = "-".join(_instant(t) for t in (sub.updated, sub.status_changed))
    return (f"unpooled.subpage:v{VERSION}.{TEMPLATE_VERSION}:{sub.pk}:{int(manage)}:{level}:{scores}:{sub.status}:{sub.visibility}:"
            f"{stamp}:"
            f"{hashlib.blake2b((pages + board).encode(), digest_size=6).hexdigest()}")


#: the largest id a row can have (a 64-bit signed integer: the ``BigAutoField`` of every model)
MAX_ID = 2**63 - 1


def _key_fields(request, pk: int) -> Submission:
    """What the page's cache key reads of submission ``pk``, by one plain query (the ORM's compiling of the full
    query was most of a cached page's cost), as an unsaved :class:`Submission` whose other fields are unset (the
    page itself is rendered from :func:`_submission`); 404 unless the viewer may see it (``can_view``)."""
    from django.db import connection

    if not 0 < pk <= MAX_ID:  # the URL takes any digits; SQLite cannot bind an integer past 64 bits (500)
        raise Http404("no such submission")
    sql = (f'SELECT s.status, s.visibility, s.updated, s.status_changed, s.team_id, c.id, c.name '
           f'FROM "{Submission._meta.db_table}" s JOIN "{Corpus._meta.db_table}" c ON c.id = s.corpus_id '
           f'WHERE s.id = %s')
    with connection.cursor() as cur:
        cur.execute(sql, [pk])
        row = cur.fetchone()
    if row is None:
        raise Http404("no such submission")
    status, visibility, updated, changed, team, corpus, name = row
    sub = Submission(pk=pk, status=status, visibility=visibility, updated=updated, status_changed=changed,
                     team_id=team, corpus=Corpus(pk=corpus, name=name))
    if not can_view(request.user, sub):
        raise Http404("no such submission")
    return sub


def _instant(t) -> str:
    """A stored time in the key, the same whether the ORM read it (aware) or a plain query did (naive UTC on
    SQLite, where times are stored in UTC; aware on PostgreSQL)."""
    if not t:
        return "0"
    if isinstance(t, str):  # a plain query on a database that returns the stored text
        t = datetime.fromisoformat(t)
    return str((t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp())


def submission_detail(request, pk: int):
    """A submission's page.  The body is rendered once per new score and served from the cache
    (:func:`page_key`); only the submission row and the newest score ids are read per request (for a reader
    not signed in, only the row's :data:`KEY_FIELDS`: the whole page comes from the cache)."""
    anonymous = anonymous_reader(request)
    sub = _key_fields(request, pk) if anonymous else _submission(request, pk)
    manage = can_manage(request.user, sub)
    newest = _newest_ids(sub)
    ids = {lv: i for lv, i in newest.items() if lv not in ("~entities", ENTITY_SCORES)}
    order = [lv for lv in LEVELS if lv in ids] + sorted(lv for lv in ids if lv not in LEVELS)
    level = request.GET.get("level")
    if level not in ids:
        level = order[0] if order else None
    board = ""
    if level is not None and sub.status == Submission.Status.PUBLISHED:
        from unpooled.service.evaluations.leaderboard import cache_key

        board = cache_key(sub.corpus, level, request.user)
    key = page_key(sub, newest, manage=manage, level=level, params=request.GET, board=board)
    if anonymous:  # the whole page, the same for every reader not signed in (..page_cache)
        return whole_page(request, f"{key}:whole",
                          lambda: _page(request, _submission(request, pk), manage, level, key))
    return _page(request, sub, manage, level, key)


def _page(request, sub: Submission, manage: bool, level: str | None, key: str):
    """The page around its body, the body from the cache under ``key`` (rendered afresh on a miss)."""
    content = cache.get(key)
    if content is None:
        from unpooled.service.accounts.throttle import begin_render

        wait = begin_render(request)
        if wait:
            resp = render(request, "web/error.html", {
                "status": 429, "heading": "Too many pages at once", "path": request.path,
                "reason": f"your address asked for many pages that had to be made afresh: try again in {wait} "
                          "seconds, or sign in"}, status=429)
            resp["Retry-After"] = str(wait)
            return resp
        content, cacheable = _render_content(request, sub, manage, level)
        if cacheable:
            cache.set(key, content, MANAGE_PAGE_SECONDS if manage else PAGE_SECONDS)
    else:
        cacheable = True
    resp = render(request, "web/submission.html", {
        "sub": sub, "content": mark_safe(content), "owner": _owner(request.user, sub),
        "form": SubmissionSettingsForm(instance=sub) if _owner(request.user, sub) else None})
    if not cacheable:  # a part is still being computed: neither this cache nor a browser's keeps the page
        resp["Cache-Control"] = "no-cache"
    return resp


def _owner(user, sub: Submission) -> bool:
    """A member of the submitting team: the one who may change the submission's settings on its page."""
    from unpooled.service.accounts.actions import team_of

    team = team_of(user)
    return team is not None and team.pk == sub.team_id


def submission_settings(request, pk: int):
    """POST: the submitting team changes visibility, description and paper link (CSRF-checked by the middleware).
    Anyone else: 404 when they may not see the submission, 403 when they may see but not change it."""
    from django.http import HttpResponseNotAllowed
    from django.shortcuts import redirect

    from unpooled.service.submissions.actions import do_update_submission

    sub = _submission(request, pk)
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not _owner(request.user, sub):
        raise PermissionDenied(f"only members of team {sub.team.name} can change submission {sub.pk}")
    form = SubmissionSettingsForm(request.POST, instance=Submission.objects.get(pk=sub.pk))
    if form.is_valid():
        from unpooled.service.accounts.actions import is_organiser
        from unpooled.service.submissions.actions import visibility_problem

        why = visibility_problem(sub, form.cleaned_data["visibility"], organiser=is_organiser(request.user))
        if why:
            form.add_error("visibility", why)
    if not form.is_valid():
        return render(request, "web/submission.html", {
            "sub": sub, "content": "", "owner": True, "form": form, "settings_open": True}, status=400)
    d = form.cleaned_data
    do_update_submission(sub, visibility=d["visibility"], description=d["description"], link=d["link"])
    return redirect(reverse("web:submission", args=[sub.pk]) + "?saved=1")


def _render_content(request, sub: Submission, manage: bool, level: str | None) -> tuple[str, bool]:
    """The body of the page, and whether it may be cached (not while a breakdown is on its way)."""
    from django.db.models import F
    from django.db.models.functions import Substr

    from unpooled.service.evaluations import breakdown
    from unpooled.service.evaluations.status import newest_scores

    newest = newest_scores(sub)
    scores = [newest[lv] for lv in LEVELS if lv in newest] + [s for lv, s in newest.items() if lv not in LEVELS]
    if level not in newest:
        level = scores[0].level if scores else None
    score = newest.get(level)
    bd = breakdown.stored(score)
    bd_state = "none" if score is None else "ready"
    if score is not None and bd is None:
        try:
            if breakdown.ensure_breakdowns(sub.corpus, level):
                score.refresh_from_db(fields=["breakdown"])
                bd = breakdown.stored(score)
                bd_state = "ready" if bd else "missing"
            else:
                bd_state = "pending"
        except Exception:  # noqa: BLE001 - the rest of the page still renders; the log has the cause
            log.exception("breakdown of submission %s at level %s failed", sub.pk, level)
            bd_state = "failed"
    from unpooled.service.evaluations.entities import page_context

    ctx = {"entities": page_context(sub), "sub": sub, "manage": manage, "scores": scores, "level": level, "score": score, "bd": bd,
           "bd_state": bd_state, "status_url": _status_url(sub), "warnings": sub.warnings.get("warnings", []),
           "counts": [(COUNT_LABELS.get(k, k.replace("_", " ")), v) for k, v in (sub.counts or {}).items()]}
    if score is not None:
        ctx.update(_headline(score))
        ctx["compare"] = _comparisons(request, sub, level)
    names = relation_names(sub.corpus)
    if bd:
        ctx["breakdown_html"] = _breakdown_html(score, bd, [s.level for s in scores])
    if manage:
        from unpooled.service.crowd.base import label_sources

        errs = breakdown.sample_errors(sub)
        epage = Paginator(errs.instance_ids, ERRORS_PER_PAGE).get_page(request.GET.get("errors_page"))
        erows = breakdown.error_rows(errs, list(epage.object_list))
        sources = label_sources(sub.corpus, [lab.annotators for lab in errs.labels.values()])
        for r in erows:
            r["context"] = _context_html(r)
            r["relation_name"] = names.get(r["i"].predicate, "")
            r["who"] = sources.who(r["label"].annotators) if r["label"] else ""
        ctx["errors"] = {"rows": erows, "total": len(errs.instance_ids),
                         "labelled": errs.labelled, "drawn": errs.drawn, "sources": sources,
                         **_page_links(request, "errors_page", epage, "errors")}
        if bd:
            mpage = Paginator(bd["missed"], MISSED_PER_PAGE).get_page(request.GET.get("missed_page"))
            mrows = breakdown.missed_rows(list(mpage.object_list))
            for r in mrows:
                r["context"] = _context_html(r)
                r["relation_name"] = names.get(r["predicate"], "")
            ctx["missed"] = {"rows": mrows, "total": bd["missed_total"],
                             "stored": len(bd["missed"]), "truth": bd["truth_total"],
                             **_page_links(request, "missed_page", mpage, "missed")}
    # the surface strings are cut in SQL: a page of 50 rows need not read 50 document texts
    inst = (RelationInstance.objects.filter(submission=sub).order_by("pk").annotate(
        subject_text=Substr("document__text", F("subject_start") + 1, F("subject_end") - F("subject_start")),
        object_text=Substr("document__text", F("object_start") + 1, F("object_end") - F("object_start")))
        .values("pk", "predicate", "value", "confidence", "line", "subject_text", "object_text", "document__doc_id",
                "subject__name", "object__name"))
    page = Paginator(inst, 50).get_page(request.GET.get("page"))
    rows = [{"doc_id": i["document__doc_id"], "subject": i["subject_text"], "subject_name": i["subject__name"],
             "predicate": i["predicate"], "object": i["value"] if i["value"] is not None else i["object_text"],
             "object_name": i["object__name"], "confidence": f"{i['confidence']:.2f}", "line": i["line"],
             "relation_name": names.get(i["predicate"], "")} for i in page]
    ctx.update(page=page, rows=rows)
    shown = {"page": page.number, **({"errors_page": ctx["errors"]["page"].number} if manage else {}),
             **({"missed_page": ctx["missed"]["page"].number} if "missed" in ctx else {})}
    # a number past the last page shows the last page: rendered, but not kept under a key of its own
    exact = all(shown.get(k, 1) == n for k, n in asked_pages(request.GET, manage=manage).items())
    return (render_to_string("web/_submission_content.html", ctx, request=request),
            bd_state in ("ready", "none") and exact)


def _comparisons(request, sub: Submission, level: str) -> list[dict]:
    """The run against the leader and its team's previous run on the viewer's leaderboard at ``level``
    (:func:`unpooled.service.evaluations.leaderboard.comparisons`); none before it is published."""
    from unpooled.service.evaluations.leaderboard import comparisons, leaderboard

    if sub.status != Submission.Status.PUBLISHED:
        return []
    board = leaderboard(sub.corpus, level=level, user=request.user)
    previous = list(Submission.objects.filter(corpus=sub.corpus, team=sub.team, created__lt=sub.created,
                                              is_reference=False).order_by("-created").values_list("pk", flat=True))
    return comparisons(board, sub.pk, previous)


def _headline(score) -> dict:
    """The headline's context: how far the correction for annotator error moved precision from the labelled
    sample's (when more than half the interval's width), and what the figures replaced (:func:`score_change`)."""
    from unpooled.service.evaluations.status import score_change

    smp = (score.details or {}).get("sample") or {}
    shift = None
    if smp.get("p") is not None and score.p is not None and score.p_lo is not None and score.p_hi is not None:
        d = abs(score.p - smp["p"])
        if d > (score.p_hi - score.p_lo) / 2:
            shift = d
    return {"shift": shift, "change": score_change(score)}


def submission_export(request, pk: int, fmt: str):
    sub = _submission(request, pk)
    if fmt not in KB_FORMATS:
        raise Http404(f"format must be one of {', '.join(KB_FORMATS)}")
    # written to a temporary file, streamed from the database, and sent from it in blocks: neither the KB nor the
    # text is held in memory (a public submission's export is anyone's to ask for, as often as they like)
    out = tempfile.TemporaryFile()
    text = io.TextIOWrapper(out, encoding="utf-8", newline="")
    export_submission(sub, fmt, text)
    text.flush()
    text.detach()
    out.seek(0)
    ext = "kb" if fmt == "tac" else "jsonl"
    return FileResponse(out, as_attachment=True, filename=f"submission-{sub.pk}.{ext}",
                        content_type="text/plain; charset=utf-8")


def submission_sample(request, pk: int):
    """The labelled sample, one JSON line per draw (team and organisers)."""
    from unpooled.service.evaluations.breakdown import sample_lines

    sub = _submission(request, pk, manage=True)
    body = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in sample_lines(sub))
    resp = HttpResponse(body, content_type="application/x-ndjson; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="submission-{sub.pk}-sample.jsonl"'
    return resp


def submission_scores(request, pk: int, fmt: str):
    """Every score of the submission, JSON or CSV (whoever can view it)."""
    from unpooled.service.evaluations.breakdown import SCORE_FIELDS, score_records

    sub = _submission(request, pk)
    if fmt not in ("json", "csv"):
        raise Http404("format must be json or csv")
    recs = score_records(sub)
    if fmt == "json":
        body = json.dumps({"submission": sub.pk, "team": sub.team.name, "run": sub.run_id, "scores": recs},
                          indent=1, ensure_ascii=False)
        resp = HttpResponse(body, content_type="application/json; charset=utf-8")
        resp["Content-Disposition"] = f'attachment; filename="submission-{sub.pk}-scores.json"'
        return resp
    rows = ([json.dumps(r[f], ensure_ascii=False) if f in ("details", "breakdown") else r[f] for f in SCORE_FIELDS]
            for r in recs)
    return csv_response(SCORE_FIELDS, rows, f"submission-{sub.pk}-scores.csv")
