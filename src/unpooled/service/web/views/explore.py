"""Exploration pages: corpora, documents, the submission browser."""

from __future__ import annotations

from pathlib import PurePath

from django.core.paginator import Paginator
from django.db.models import Count, Q, Value
from django.db.models.functions import Greatest, Lower, StrIndex, Substr
from django.shortcuts import get_object_or_404, render

from unpooled.service.accounts.actions import open_signup, role_of, team_of, visible_submissions
from unpooled.service.annotation.layers import annotation_layers
from unpooled.service.corpora.models import Corpus, Document
from unpooled.service.evaluations.status import attach_level_states
from unpooled.service.submissions.models import Submission


def home(request):
    corpora = Corpus.objects.select_related("schema").annotate(
        n_submissions=Count("submissions", filter=Q(submissions__visibility=Submission.Visibility.PUBLIC)))
    recent = attach_level_states(visible_submissions(request.user, Submission.objects.select_related("team", "corpus"))[:20])
    corpora = list(corpora)
    # the corpus a newcomer is pointed at: the one with most public submissions
    first = max(corpora, key=lambda c: (c.n_submissions, -c.pk), default=None)
    return render(request, "web/home.html", {
        "corpora": corpora, "submissions": recent, "first_corpus": first, "role": role_of(request.user),
        "team": team_of(request.user), "open_signup": open_signup()})


#: characters of text shown either side of a search match
SNIPPET = 70


def _snippet(doc, n: int) -> dict | None:
    """The text around the first match of a search (``hit``: 1-based, 0 when only the id or title matched)."""
    if not doc.hit:
        return None
    i = doc.hit - doc.snip_from
    s = doc.snippet
    return {"before": s[:i], "match": s[i:i + n], "after": s[i + n:],
            "cut_left": doc.snip_from > 1, "cut_right": doc.snip_from - 1 + len(s) < doc.length}


def corpus_detail(request, name: str):
    corpus = get_object_or_404(Corpus.objects.select_related("schema"), name=name)
    q = request.GET.get("q", "").strip()[:200]
    docs = corpus.documents.only("pk", "doc_id", "title", "length")
    if q:
        docs = docs.filter(Q(doc_id__icontains=q) | Q(title__icontains=q) | Q(text__icontains=q))
        # where the text matches, and the text around it, cut in SQL (a page need not read 50 document texts)
        hit = StrIndex(Lower("text"), Lower(Value(q)))
        start = Greatest(hit - SNIPPET, 1)
        docs = docs.annotate(hit=hit, snip_from=start, snippet=Substr("text", start, 2 * SNIPPET + len(q)))
    page = Paginator(docs, 50).get_page(request.GET.get("page"))
    if q:
        for d in page.object_list:
            d.snip = _snippet(d, len(q))
    # the file's name only: the directory it was loaded from is the server's business (review: "server path")
    source_name = PurePath(corpus.source).name if corpus.source else "-"
    return render(request, "web/corpus.html", {"corpus": corpus, "page": page, "q": q, "source_name": source_name})


def document_detail(request, name: str, pk: int):
    doc = get_object_or_404(Document.objects.select_related("corpus__schema"), corpus__name=name, pk=pk)
    from unpooled.service.annotation.layers import gold_visible, layered_sentences

    sents = list(doc.sentences.values_list("index", "start", "end"))
    layers = annotation_layers(doc, request.user)
    gold_hidden = not gold_visible(doc.corpus, request.user)
    entities = [] if gold_hidden else list(doc.gold_entities.prefetch_related("mentions").order_by("index"))
    relations = [] if gold_hidden else list(doc.gold_relations.select_related("subject", "object"))
    for r in relations:
        r.relation_name = layers["relation_names"].get(r.predicate, "")
    gold = [(m.start, m.end, f"gold {e.type} #{e.index} {e.name}") for e in entities for m in e.mentions.all()]
    sentences = layered_sentences(doc.text, sents, {"gold": gold, "exh": layers["exhaustive_spans"],
                                                    "ver": layers["verified_spans"]})
    return render(request, "web/document.html", {"doc": doc, "sentences": sentences, "entities": entities,
                                                 "relations": relations, "gold_hidden": gold_hidden, **layers})


def submission_list(request):
    """The submission browser: what the user may see, filtered by corpus, team, stage and text."""
    subs = visible_submissions(request.user, Submission.objects.select_related("team", "corpus"))
    f = {k: request.GET.get(k, "").strip() for k in ("q", "corpus", "team", "status")}
    if f["corpus"]:
        subs = subs.filter(corpus__name=f["corpus"])
    if f["team"]:
        subs = subs.filter(team__name=f["team"])
    if f["status"]:
        subs = subs.filter(status=f["status"])
    if f["q"]:
        subs = subs.filter(Q(run_id__icontains=f["q"]) | Q(team__name__icontains=f["q"])
                           | Q(description__icontains=f["q"]) | Q(file_name__icontains=f["q"]))
    page = Paginator(subs, 50).get_page(request.GET.get("page"))
    page.object_list = attach_level_states(page.object_list)
    query = "&".join(f"{k}={v}" for k, v in f.items() if v)
    return render(request, "web/submissions.html", {
        "page": page, "f": f, "query": query, "corpora": Corpus.objects.values_list("name", flat=True),
        "statuses": Submission.Status.choices})


def favicon(request):
    """``/favicon.ico``, which browsers ask for on pages without an icon link (the API docs): the site's icon."""
    from django.http import HttpResponseRedirect
    from django.templatetags.static import static

    return HttpResponseRedirect(static("web/favicon.svg"))
