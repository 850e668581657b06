"""Server-rendered pages. Views are thin: fetch, call an action, render."""

from __future__ import annotations

import io
import uuid

from django.conf import settings
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from unpooled.service.corpora.models import Corpus, Document
from unpooled.service.submissions.actions import export_submission
from unpooled.service.submissions.models import RelationInstance, Submission

from unpooled.service.annotation.layers import annotation_layers

from .forms import UploadForm


def home(request):
    corpora = Corpus.objects.select_related("schema").annotate(n_submissions=Count("submissions"))
    recent = Submission.objects.select_related("team", "corpus")[:20]
    return render(request, "web/home.html", {"corpora": corpora, "submissions": recent})


def corpus_detail(request, name: str):
    corpus = get_object_or_404(Corpus.objects.select_related("schema"), name=name)
    q = request.GET.get("q", "").strip()
    docs = corpus.documents.only("pk", "doc_id", "title", "length")
    if q:
        docs = docs.filter(Q(doc_id__icontains=q) | Q(title__icontains=q) | Q(text__icontains=q))
    page = Paginator(docs, 50).get_page(request.GET.get("page"))
    return render(request, "web/corpus.html", {"corpus": corpus, "page": page, "q": q})


def document_detail(request, name: str, pk: int):
    doc = get_object_or_404(Document.objects.select_related("corpus"), corpus__name=name, pk=pk)
    sentences = [(s.index, doc.text[s.start:s.end]) for s in doc.sentences.all()]
    entities = doc.gold_entities.prefetch_related("mentions").order_by("index")
    relations = doc.gold_relations.select_related("subject", "object")
    return render(request, "web/document.html", {"doc": doc, "sentences": sentences, "entities": entities,
                                                 "relations": relations, **annotation_layers(doc)})


def leaderboard(request, name: str):
    from unpooled.service.evaluations.leaderboard import leaderboard as build

    corpus = get_object_or_404(Corpus, name=name)
    level = request.GET.get("level", "instance")
    if level not in ("instance", "relation", "entity"):
        raise Http404("level must be instance, relation or entity")
    return render(request, "web/leaderboard.html", {"corpus": corpus, **build(corpus, level=level)})


def submission_list(request):
    subs = Submission.objects.select_related("team", "corpus")
    page = Paginator(subs, 50).get_page(request.GET.get("page"))
    return render(request, "web/submissions.html", {"page": page})


def submission_detail(request, pk: int):
    sub = get_object_or_404(Submission.objects.select_related("team", "corpus"), pk=pk)
    by_pred = (RelationInstance.objects.filter(submission=sub).values("predicate")
               .annotate(n=Count("id")).order_by("-n"))
    inst = (RelationInstance.objects.filter(submission=sub).select_related("document", "subject", "object")
            .order_by("pk"))
    page = Paginator(inst, 50).get_page(request.GET.get("page"))
    rows = []
    for i in page:
        text = i.document.text
        rows.append({"i": i, "subject": text[i.subject_start:i.subject_end],
                     "object": i.value if i.value is not None else text[i.object_start:i.object_end]})
    return render(request, "web/submission.html", {"sub": sub, "by_pred": by_pred, "page": page, "rows": rows,
                                                   "warnings": sub.warnings.get("warnings", [])})


def submission_export(request, pk: int, fmt: str):
    sub = get_object_or_404(Submission, pk=pk)
    if fmt not in ("tac", "jsonl"):
        raise Http404("format must be tac or jsonl")
    buf = io.StringIO()
    export_submission(sub, fmt, buf)
    resp = HttpResponse(buf.getvalue(), content_type="text/plain; charset=utf-8")
    ext = "kb" if fmt == "tac" else "jsonl"
    resp["Content-Disposition"] = f'attachment; filename="submission-{sub.pk}.{ext}"'
    return resp


def upload(request):
    from unpooled.service.submissions.tasks import ingest_upload

    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES)
        if form.is_valid():
            f = form.cleaned_data["file"]
            if f.size > settings.LIMITS.max_bytes:
                form.add_error("file", f"the file is larger than the limit of {settings.LIMITS.max_bytes:,} bytes")
            else:
                settings.UPLOAD_DIR.mkdir(parents=True, exist_ok=True)
                dest = settings.UPLOAD_DIR / f"{uuid.uuid4().hex}.upload"
                with open(dest, "wb") as out:
                    for chunk in f.chunks():
                        out.write(chunk)
                result = ingest_upload.enqueue(
                    str(dest), form.cleaned_data["corpus"].name, form.cleaned_data["team"],
                    form.cleaned_data["run"], form.cleaned_data["format"], f.name,
                )
                return redirect("web:upload_status", task_id=result.id)
    else:
        form = UploadForm()
    return render(request, "web/upload.html", {"form": form})


def upload_status(request, task_id: str):
    from django_tasks import TaskResultStatus
    from django_tasks.exceptions import TaskResultDoesNotExist

    from unpooled.service.submissions.tasks import ingest_upload

    try:
        result = ingest_upload.get_result(task_id)
    except (TaskResultDoesNotExist, ValueError):
        raise Http404("no such upload") from None
    outcome = result.return_value if result.status == TaskResultStatus.SUCCESSFUL else None
    if outcome and outcome.get("ok"):
        return redirect("web:submission", pk=outcome["submission"])
    errors = [str(e) for e in result.errors] if result.status == TaskResultStatus.FAILED else []
    return render(request, "web/upload_status.html", {"result": result, "outcome": outcome, "errors": errors,
                                                      "done": result.is_finished})
