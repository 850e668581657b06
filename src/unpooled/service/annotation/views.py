"""Annotation pages: the work queue, the three task pages, the MTurk entry point, the organiser page.

Views are thin: they find the lease, call an action and render.  No page shows which
submission (system) asked for an item.
"""

from __future__ import annotations

import json
import re
import time

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.cache import cache
from django.db.models import Count
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from unpooled.core.annotation.answers import AnswerError

from . import actions, hits, leasing
from .guidelines import INSTRUCTIONS, entity_guide
from .models import Assignment, Backend, Kind, Task

#: an answer's JSON is refused beyond this size (the largest entity answer allowed is far smaller)
MAX_ANSWER_BYTES = 512 * 1024

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)

#: the deepest nesting of lists and objects an answer may have (the deepest task format nests three levels)
MAX_ANSWER_DEPTH = 16


def decode_answer(raw: str):
    """The answer's JSON, or ValueError: also for JSON nested deeper than :data:`MAX_ANSWER_DEPTH` (the decoder
    recursed until Python's limit, a RecursionError that answered 500 on ``[[[[...``)."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_ANSWER_DEPTH} levels") from None
    level = [value] if isinstance(value, (dict, list)) else []  # the lists and objects at one depth
    for _ in range(MAX_ANSWER_DEPTH):
        if not level:
            return value
        level = [x for v in level for x in (v.values() if isinstance(v, dict) else v) if isinstance(x, (dict, list))]
    if level:
        raise ValueError(f"nested deeper than {MAX_ANSWER_DEPTH} levels")
    return value


def segments(text: str, start: int, end: int, marks: list[tuple[int, int, str]]) -> list[tuple[str, str]]:
    """Split ``text[start:end]`` into (piece, css class) with the non-overlapping ``marks`` highlighted."""
    out, pos = [], start
    for s, e, cls in sorted((max(s, start), min(e, end), c) for s, e, c in marks if s < end and e > start):
        if s < pos:
            continue
        if s > pos:
            out.append((text[pos:s], ""))
        out.append((text[s:e], cls))
        pos = e
    if pos < end:
        out.append((text[pos:end], ""))
    return out


def tokens(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _submitter_refused(request):
    """Submitters do not annotate: they could recognise, and judge, their own system's output."""
    from unpooled.service.accounts.actions import can_annotate

    if not can_annotate(request.user):
        return render(request, "annotation/blocked.html", {"submitter": True}, status=403)
    return None


@login_required
def queue(request):
    if (refused := _submitter_refused(request)) is not None:
        return refused
    ann = leasing.annotator_for_user(request.user)
    open_by_kind = dict(leasing.available_tasks(ann).filter(is_control=False).values_list("kind")
                        .annotate(n=Count("id")).values_list("kind", "n"))
    for_you = {}
    for k in Kind.values:
        if open_by_kind.get(k):  # as the task page counts: the item you hold is left too (its number reopens it)
            got = leasing.progress(ann, k)
            for_you[k] = f"{got.left}+" if got.more else got.left
    done = ann.answers.count()
    # one count a kind, the gold controls in it (security review N3): with the open items' count beside it, the
    # difference told how many controls there were, and which answer had been one (it fell, the other did not)
    kinds = [{"kind": k, "label": label, "for_you": for_you.get(k, 0)} for k, label in Kind.choices]
    return render(request, "annotation/queue.html", {"annotator": ann, "kinds": kinds, "done": done,
                                                     "needs_invite": leasing.scope_of(ann).open_only})


@login_required
def next_task(request, kind: str):
    if kind not in Kind.values:
        raise Http404(f"no task type {kind!r}")
    if (refused := _submitter_refused(request)) is not None:
        return refused
    ann = leasing.annotator_for_user(request.user)
    if ann.blocked:
        return render(request, "annotation/blocked.html", {"annotator": ann}, status=403)
    lease = leasing.lease_next(ann, kind=kind)
    if lease is None:
        return render(request, "annotation/empty.html", {
            "kind": kind, "label": Kind(kind).label, "reasons": leasing.explain_empty(ann, kind),
            "done": ann.answers.filter(task__kind=kind).count(), **_undo_context(request, ann, None)})
    return redirect("annotation:task", token=lease.token)


LAST_ANSWER = "unpooled.last-answer"  # session: the token of this browser's last in-house answer (undo offers it)
UNDONE = "unpooled.undone"            # session: {token, value} of an answer just withdrawn (its page restores it)
UNDO_REFUSED = "unpooled.undo-refused"  # session: why the last undo was refused (the next page says so)


def _undo_context(request, ann, lease) -> dict:
    """The undo offer of the page after an answer: the last answer's lease, while it may still be undone (its item
    not :func:`~.actions.decided`; :func:`actions.undo_answer` decides for real), and why an undo just failed."""
    out = {"undo_refused": request.session.pop(UNDO_REFUSED, None)}
    token = request.session.get(LAST_ANSWER)
    if token and (lease is None or token != lease.token):
        last = (Assignment.objects.filter(token=token, annotator=ann, status=Assignment.Status.SUBMITTED)
                .select_related("task__corpus__annotation_settings").first())
        decided = last is not None and actions.decided(last.task)
        if last is not None and not decided and last.expires >= timezone.now():
            out["undo_token"] = token
        elif last is not None:  # saved, and said so: an undo key that silently did nothing was a bug (UX review #3)
            out["saved_final"] = "it completed its item" if decided else "its time to change it has run out"
            out["saved_token"] = token
    return out


@require_POST
@login_required
def undo(request, token: str):
    """Withdraw the caller's last answer (lease ``token``) and reopen its task page with the answer filled in;
    another user's lease is a 404, as everywhere; a refusal says why on the next page."""
    lease = _lease_for(request, token)
    if lease.annotator.backend != Backend.INHOUSE:
        raise Http404("no such task for you")
    try:
        value = actions.undo_answer(lease)
    except actions.UndoRefused as exc:
        request.session[UNDO_REFUSED] = str(exc)
        request.session.pop(LAST_ANSWER, None)
        return redirect("annotation:next", kind=lease.task.kind)
    request.session.pop(LAST_ANSWER, None)
    request.session[UNDONE] = {"token": token, "value": value}
    return redirect("annotation:task", token=token)


def _lease_for(request, token: str) -> Assignment:
    """The lease of ``token`` for this caller: an in-house lease answers to its signed-in owner only, an MTurk
    lease to whoever holds its token (given once, by the signed HIT link); a simulated worker's never."""
    # the lease, its task and annotator in one light query; the document and the schema are read only when
    # the task's body is not in the cache yet (_body)
    lease = get_object_or_404(Assignment.objects.select_related("task", "task__corpus", "annotator"), token=token)
    ann = lease.annotator
    if ann.backend == Backend.INHOUSE:
        if not request.user.is_authenticated or ann.user_id != request.user.pk:
            raise Http404("no such task for you")
    elif ann.backend != Backend.MTURK:
        raise Http404("no such task for you")
    return lease


#: Mechanical Turk shows the task page in a frame and the worker's browser finishes the assignment there
MTURK_FRAME = {"frame-ancestors": hits.MTURK_SUBMIT_HOSTS}
MTURK_FINISH = {**MTURK_FRAME, "form-action": hits.MTURK_SUBMIT_HOSTS}


def _for_mturk(response, policy=MTURK_FRAME):
    """Let Mechanical Turk's pages frame ``response`` (and no one else): X-Frame-Options off, the
    Content-Security-Policy's ``frame-ancestors`` (and ``form-action``) naming the two MTurk hosts
    (read by :class:`unpooled.service.config.security.SecurityHeaders`)."""
    response.xframe_options_exempt = True
    response.csp_allow = {**policy, **getattr(response, "csp_allow", {})}
    return response


# schema row id -> (read at, definition, _SchemaParts): parsing costs more than the page
_SCHEMAS: dict[int, tuple] = {}
_SCHEMA_SECONDS = 60.0
_TOKENS: dict[int, tuple] = {}  # document id -> (text length, lead, tokens HTML); bounded below
_TOKENS_KEPT = 256
_GUIDES: dict[str, SafeString] = {}  # task kind -> the instructions' HTML


class _SchemaParts:
    """What the task pages show of a schema, rendered once per process (the loops cost more than the rest
    of the page): the relations with their usual argument type pairs, the entity types and their legend."""

    def __init__(self, schema):
        rels = [(r.name, r.description) for r in schema.canonical_relations]
        self.relations = rels
        self.type_check = schema.type_check
        self.pairs = {r.name: r.pairs for r in schema.canonical_relations}  # the usual argument type pairs
        self.relations_json = json.dumps([[r.name, r.description or r.name, sorted(f"{a}>{b}" for a, b in r.pairs)]
                                          for r in schema.canonical_relations])
        self.entity_types = sorted(schema.entity_types.items())
        self.types = [(i + 1, t, desc) for i, (t, desc) in enumerate(self.entity_types)]
        self.types_json = json.dumps([t for t, _ in self.entity_types])
        # one colour per type, by its place in the legend (css classes c-1 ... c-10); a type's button marks the selection
        self.legend = mark_safe(" · ".join(
            format_html('<button type="button" class="tag c-{}" data-type="{}"><kbd>{}</kbd> {}</button> '
                        '<span class="muted">{}</span>', n, t, n, t, desc)
            for n, t, desc in self.types))

    def fits(self, name: str, subject_types, object_types) -> bool:
        """Whether one of relation ``name``'s usual type pairs (:attr:`~unpooled.core.schema.model.RelationType.
        pairs`) has a subject of ``subject_types`` and an object of ``object_types`` (every relation fits under a
        schema whose types are not checked; an empty side is unknown and fits any type)."""
        if self.type_check == "off":
            return True
        return any((not subject_types or a in subject_types) and (not object_types or b in object_types)
                   for a, b in self.pairs[name])

    def relation_options(self, subject_types=frozenset(), object_types=frozenset()) -> SafeString:
        """The "another relation" ``<option>`` list: the relations that fit the arguments' types first, the
        others after them in a group of their own."""
        def opts(rows):
            return "".join(format_html('<option value="{}">{} ({})</option>', n, d or n, n) for n, d in rows)

        fit = [(n, d) for n, d in self.relations if self.fits(n, subject_types, object_types)]
        rest = [(n, d) for n, d in self.relations if not self.fits(n, subject_types, object_types)]
        if not rest or not fit:
            return mark_safe(opts(self.relations))
        label = f"{'/'.join(sorted(subject_types)) or 'any'} → {'/'.join(sorted(object_types)) or 'any'}"
        return mark_safe(format_html('<optgroup label="{}" id="fitting">', f"fit {label}") + opts(fit) + "</optgroup>"
                         + format_html('<optgroup label="{}">', "other relations (types do not fit)") + opts(rest)
                         + "</optgroup>")


def forget() -> None:
    """Drop what this process keeps of schemas, documents and instructions (tests whose rows reuse ids)."""
    _SCHEMAS.clear()
    _TOKENS.clear()
    _GUIDES.clear()


def _schema_parts(schema_id: int) -> _SchemaParts:
    """The parts of schema row ``schema_id``, parsed once per process; re-read after :data:`_SCHEMA_SECONDS`
    (stored schemas do not change; this bounds how long an edit in the admin takes to show)."""
    got = _SCHEMAS.get(schema_id)
    now = time.monotonic()
    if got is None or now - got[0] > _SCHEMA_SECONDS:
        from unpooled.service.corpora.models import RelationSchema

        name, definition = RelationSchema.objects.values_list("name", "definition").get(pk=schema_id)
        if got is None or got[1] != definition:
            row = RelationSchema(pk=schema_id, name=name, definition=definition)
            got = (now, definition, _SchemaParts(row.schema()))
        else:
            got = (now, got[1], got[2])
        _SCHEMAS[schema_id] = got
    return got[2]


def _tokens_html(doc) -> tuple[str, SafeString]:
    """The text before the first token, and every token as a ``<span class="tok" data-s data-e>`` followed
    by its trailing text: the entity task's document, built once per document and process."""
    got = _TOKENS.get(doc.pk)
    if got is not None and got[0] == len(doc.text):
        return got[1], got[2]
    text = doc.text
    toks = tokens(text)
    lead = text[:toks[0][0]] if toks else text
    parts = []
    for (s, e), nxt in _with_next(toks):
        parts.append(f'<span class="tok" data-s="{s}" data-e="{e}">{escape(text[s:e])}</span>'
                     f"{escape(text[e:(nxt[0] if nxt else len(text))])}")
    html = mark_safe("".join(parts))
    if len(_TOKENS) >= _TOKENS_KEPT:
        _TOKENS.pop(next(iter(_TOKENS)))
    _TOKENS[doc.pk] = (len(text), lead, html)
    return lead, html


def _guide_html(task: Task) -> SafeString:
    """The instructions of ``task``'s kind; the entity task's name its corpus schema's types and keys."""
    key = f"{task.kind}:{task.corpus.schema_id}" if task.kind == Kind.ENTITIES else task.kind
    got = _GUIDES.get(key)
    if got is None:
        guide = INSTRUCTIONS[task.kind]
        if task.kind == Kind.ENTITIES:
            parts = _schema_parts(task.corpus.schema_id)
            guide = entity_guide(dict(parts.entity_types))
        got = _GUIDES[key] = mark_safe(render_to_string("annotation/_guide.html", {"guide": guide}))
    return got


#: a task's rendered body lives this long in the cache (it never changes; this bounds a schema edit's delay)
BODY_SECONDS = 3600


ANSWERED = "unpooled.answered"  # session flag: this browser's annotator has answered before


def _first_time(request, lease: Assignment) -> bool:
    """Whether the annotator has never answered (the instructions open by themselves); asked of the
    database once per session."""
    if request.session.get(ANSWERED):
        return False
    if lease.annotator.answers.exists():
        request.session[ANSWERED] = True
        return False
    return True


def _context(request, lease: Assignment, error: str | None = None, value=None) -> dict:
    """The page around the task's body: the lease, the instructions, the error of a rejected answer; for an
    in-house annotator the progress ("n done · m left for you") and the undo of the last answer."""
    task = lease.task
    mturk = lease.annotator.backend == Backend.MTURK
    ctx = {"lease": lease, "task": task, "kind": task.kind, "guide_html": _guide_html(task), "error": error,
           "first_time": _first_time(request, lease), "previous": value, "expires": lease.expires, "now": timezone.now(),
           "mturk": mturk, "body": _body(task)}
    if not mturk:
        undone = request.session.get(UNDONE)
        if undone and undone.get("token") == lease.token:
            request.session.pop(UNDONE)
            if value is None:
                ctx["previous"], ctx["undone"] = undone.get("value"), True
        ctx["progress"] = leasing.progress(lease.annotator, task.kind)
        ctx.update(_undo_context(request, lease.annotator, lease))
    return ctx


def _body(task: Task) -> SafeString:
    """The task itself, rendered once and kept in the cache shared by the server's processes: it depends on
    the task (payload, document) and its corpus's schema only, never on the lease or the annotator."""
    key = f"unpooled.task-body:v9:{task.pk}:{task.kind}:{task.guideline_version}"
    html = cache.get(key)
    if html is None:
        full = Task.objects.select_related("document", "corpus").get(pk=task.pk)
        html = render_to_string("annotation/_task_body.html", _body_context(full))
        cache.set(key, html, BODY_SECONDS)
    return mark_safe(html)


def _body_context(task: Task) -> dict:
    doc = task.document
    parts = _schema_parts(task.corpus.schema_id)
    ctx = {"task": task, "kind": task.kind}
    if task.kind == Kind.VERIFY:
        p = task.payload
        c0, c1 = p["context"]
        marks = [(p["subject"]["start"], p["subject"]["end"], "subj"), (p["object"]["start"], p["object"]["end"], "obj")]
        ctx["pieces"] = segments(doc.text, c0, c1, marks)
        ctx["p"] = p
        s_types, o_types = _argument_types(p, parts)
        ctx["relation_options"] = parts.relation_options(s_types, o_types)
    elif task.kind == Kind.CLUSTERS:
        ctx["items"] = [{"index": i, **it} for i, it in enumerate(task.payload.get("items", []))]
    elif task.kind == Kind.ENTITIES:
        ctx["lead"], ctx["tokens_html"] = _tokens_html(doc)
        ctx["types_json"] = parts.types_json
        ctx["legend"] = parts.legend
    else:
        p = task.payload
        mentions = p["mentions"]
        rows = list(doc.sentences.order_by("index").values_list("start", "end"))
        pairs = []
        for i, (a, b) in enumerate(p["pairs"]):
            ma, mb = mentions[a], mentions[b]
            # the sentence(s) from the first mention's to the second's: a pair of the document recall protocol can
            # span several sentences
            sa = next(((s0, e0) for s0, e0 in rows if s0 <= min(ma["start"], mb["start"]) < e0), (0, len(doc.text)))
            sb = next(((s0, e0) for s0, e0 in rows if s0 <= max(ma["start"], mb["start"]) < e0), sa)
            s = (min(sa[0], sb[0]), max(sa[1], sb[1]))
            pairs.append({"index": i, "a": doc.text[ma["start"]:ma["end"]], "b": doc.text[mb["start"]:mb["end"]],
                          "a_type": ma["type"], "b_type": mb["type"],
                          "pieces": segments(doc.text, s[0], s[1], [(ma["start"], ma["end"], "subj"),
                                                                     (mb["start"], mb["end"], "obj")])})
        ctx["pairs"] = pairs
        ctx["relations_json"] = parts.relations_json
        ctx["type_check"] = parts.type_check
    return ctx


def _argument_types(p: dict, parts: _SchemaParts) -> tuple[frozenset, frozenset]:
    """The types of a verification item's two mentions, for filtering "another relation": the types the claimed
    relation usually takes.  Never the gold layer's (its types at the item's spans told that a span was a gold
    mention, of which type, and a gold control, whose spans always are, by its label), nor a type the system wrote
    (the page does not show what only the system said)."""
    claimed = parts.pairs.get(p.get("predicate"), frozenset())
    return frozenset(a for a, _ in claimed), frozenset(b for _, b in claimed)


def _with_next(toks):
    for i, t in enumerate(toks):
        yield t, (toks[i + 1] if i + 1 < len(toks) else None)


@csrf_exempt
def task_page(request, token: str):
    """The task page of a lease: GET shows it, POST answers it.

    An in-house lease is checked for CSRF like any form (its owner is signed in).  An MTurk lease is not:
    it runs in Mechanical Turk's frame, where the browser sends no cookie of this site, and its unguessable
    token in the URL is the credential a forged cross-site request would lack.  A signed-out visitor of an in-house
    lease (their session ended, or they signed out in another tab) is asked to sign in and sent back here."""
    if not request.user.is_authenticated and Assignment.objects.filter(
            token=token, annotator__backend=Backend.INHOUSE).exists():
        return redirect_to_login(request.path)
    lease = _lease_for(request, token)
    if lease.annotator.backend == Backend.MTURK:
        return _for_mturk(_task_page(request, lease))
    return _task_page_csrf(request, lease)


def _task_page(request, lease: Assignment):
    mturk = lease.annotator.backend == Backend.MTURK
    if lease.status == Assignment.Status.SUBMITTED:
        return _mturk_finish(request, lease) if mturk else redirect("annotation:next", kind=lease.task.kind)
    if lease.status == Assignment.Status.SKIPPED:
        return render(request, "annotation/expired.html", {"kind": lease.task.kind, "skipped": True}, status=410)
    if request.method == "POST":
        raw = request.POST.get("answer", "")
        if len(raw) > MAX_ANSWER_BYTES:
            return render(request, "annotation/task.html", _context(
                request, lease, f"answer: {len(raw):,} characters; at most {MAX_ANSWER_BYTES:,}"), status=400)
        try:
            value = decode_answer(raw)
        except ValueError as exc:
            return render(request, "annotation/task.html", _context(request, lease, f"answer: not JSON ({exc})"),
                          status=400)
        try:
            actions.submit_answer(lease, value, seconds=request.POST.get("seconds") or None)
        except AnswerError as exc:
            return render(request, "annotation/task.html", _context(request, lease, str(exc), value), status=400)
        except actions.AnnotationError as exc:  # for good: this lease can never take it (its draft goes)
            return render(request, "annotation/task.html", {**_context(request, lease, str(exc), value),
                                                            "refused_for_good": True}, status=409)
        if not mturk:
            request.session[ANSWERED] = True
            request.session[LAST_ANSWER] = lease.token
            return redirect("annotation:next", kind=lease.task.kind)
        return _mturk_finish(request, lease)
    renewed = None
    if lease.status == Assignment.Status.EXPIRED or lease.expires < timezone.now():
        # an in-house lease is renewed while the item is free (the page's draft comes back); an MTurk worker is sent
        # back to the HIT (its entry renews the lease while Amazon's assignment lasts), not to the in-house queue
        renewed = None if mturk else leasing.renew(lease)
        if renewed is None:
            return render(request, "annotation/expired.html", {"kind": lease.task.kind, "mturk": mturk}, status=410)
        lease = _lease_for(request, lease.token)
    return render(request, "annotation/task.html", {**_context(request, lease), "renewed": renewed is not None})


_task_page_csrf = csrf_protect(_task_page)


def _mturk_finish(request, lease: Assignment):
    """The answered MTurk lease's last page: its form hands the assignment (and the lease's token, which
    confirms the answer later) back to the MTurk host the entry named, one of two."""
    lease.refresh_from_db(fields=["external_ref", "submit_to", "token"])
    submit_to = lease.submit_to if lease.submit_to in hits.MTURK_SUBMIT_HOSTS else hits.MTURK_SUBMIT_HOSTS[1]
    return _for_mturk(render(request, "annotation/mturk_submit.html", {
        "submit_to": submit_to, "assignment_id": lease.external_ref.split("/")[-1], "token": lease.token}),
        MTURK_FINISH)


@require_POST
@login_required
def skip(request, token: str):
    lease = _lease_for(request, token)
    if lease.annotator.backend != Backend.INHOUSE:
        raise Http404("no such task for you")
    if lease.status != Assignment.Status.LEASED:
        return redirect("annotation:next", kind=lease.task.kind)
    try:
        leasing.release(lease)
    except leasing.SkipRefused as exc:
        return render(request, "annotation/task.html", {**_context(request, lease), "skip_refused": str(exc)},
                      status=429)
    return redirect("annotation:next", kind=lease.task.kind)


def mturk_entry(request):
    """ExternalQuestion landing page: ``?hit=`` (a link posted before: ``?task=&sig=``) as posted, plus Amazon's
    ``hitId``, ``assignmentId``, ``workerId`` and ``turkSubmitTo`` (rules in :mod:`.hits`).

    Nothing is shown before the signed link checks out.  In preview (``assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE``)
    the page shows the instructions only; with an accepted assignment it leases the task to the worker and
    sends them to the task page.
    """
    try:
        entry = hits.check_entry(request.GET)
        if entry.preview:
            return _for_mturk(render(request, "annotation/preview.html",
                                     {"guide": INSTRUCTIONS[entry.task.kind], "kind": entry.task.kind}))
        lease = hits.lease_for_entry(entry)
    except hits.EntryRefused as exc:
        return _for_mturk(render(request, "annotation/refused.html", {"reason": str(exc)}, status=exc.status))
    return redirect("annotation:task", token=lease.token)
