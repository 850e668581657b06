"""Cross-document clustering: the crowd groups the corpus's unlinked (NIL) entities across documents.

Once every sampled document's entity layer is final
(:func:`~unpooled.service.annotation.actions.complete_task`), :func:`request_clustering` asks for the
clustering tasks; :func:`nil_identity` reads the cross-document entities from the newest complete generation.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from unpooled.core.annotation import clustering as clu
from unpooled.service.corpora.models import Corpus

from .guidelines import VERSIONS
from .models import ExhaustiveDocument, Kind, Task, settings_for


def nil_items(corpus: Corpus) -> list[dict]:
    """The canonical mention of every unlinked (NIL) cluster of the corpus's final exhaustive entity layers:
    per cluster its longest mention (the first on ties), with the sentence around it; in document order.
    What the clustering tasks show (:func:`request_clustering`, in blocks of at most
    :data:`~unpooled.core.annotation.clustering.MAX_ITEMS`)."""
    from unpooled.service.corpora.models import Sentence

    docs = ExhaustiveDocument.objects.filter(corpus=corpus).values("document_id")
    out: list[dict] = []
    tasks = (Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES, key="", status=Task.Status.COMPLETE,
                                 document_id__in=docs).select_related("document").order_by("document_id"))
    for t in tasks:
        clusters: dict = {}
        for m in (t.result or {}).get("mentions", []):
            clusters.setdefault(m["cluster"], []).append(m)
        nil = {c: ms for c, ms in clusters.items() if not any(m.get("link") for m in ms)}
        if not nil:
            continue
        sents = list(Sentence.objects.filter(document=t.document).order_by("index").values_list("start", "end"))
        text = t.document.text
        for c, ms in sorted(nil.items(), key=lambda kv: min(m["start"] for m in kv[1])):
            best = max(ms, key=lambda m: (m["end"] - m["start"], -m["start"]))
            s0, s1 = next(((a, b) for a, b in sents if a <= best["start"] < b),
                          (max(0, best["start"] - 150), min(len(text), best["end"] + 150)))
            out.append({"doc": t.document.doc_id, "document": t.document_id, "cluster": c, "type": best["type"],
                        "start": best["start"], "end": best["end"], "text": text[best["start"]:best["end"]],
                        "context": [s0, s1], "before": text[max(s0, best["start"] - 200):best["start"]],
                        "after": text[best["end"]:min(s1, best["end"] + 200)]})
    return out


def request_clustering(corpus: Corpus, *, now=None) -> list[Task]:
    """The corpus's cross-document clustering tasks over :func:`nil_items` (none when there are fewer than two).

    One task when the items fit :data:`~unpooled.core.annotation.clustering.MAX_ITEMS`, else one per block of
    :func:`~unpooled.core.annotation.clustering.blocks` (by entity type, large types in runs of similar names;
    a block of one item needs no task).  The tasks of one set of items are a *generation* (their key is the items'
    digest, then ``:i/n`` when there are several; ``payload["block"]`` is ``[i, n]``): a new exhaustive layer
    gives a new generation and cancels the open tasks of older ones."""
    import hashlib
    import json

    now = now or timezone.now()
    items = nil_items(corpus)
    if len(items) < 2:
        return []
    digest = hashlib.blake2b(json.dumps([(i["doc"], i["cluster"], i["start"], i["end"]) for i in items])
                             .encode(), digest_size=8).hexdigest()
    parts = [p for p in clu.blocks(items, clu.MAX_ITEMS) if len(p) >= 2]
    n = len(parts)
    keys = [f"clusters:{digest}"] if n == 1 else [f"clusters:{digest}:{b + 1}/{n}" for b in range(n)]
    st = settings_for(corpus)
    out = []
    with transaction.atomic():
        Task.objects.filter(corpus=corpus, kind=Kind.CLUSTERS, status=Task.Status.OPEN).exclude(key__in=keys).update(
            status=Task.Status.CANCELLED)
        for b, (key, part) in enumerate(zip(keys, parts)):
            its = [items[i] for i in part]
            task, _ = Task.objects.get_or_create(
                corpus=corpus, kind=Kind.CLUSTERS, document_id=its[0]["document"], key=key,
                defaults={"payload": {"items": its, "block": [b, n]}, "answers_needed": st.answers_per_item,
                          "priority": now, "guideline_version": VERSIONS["clusters"]})
            out.append(task)
    return out


def clustering_generation(task: Task) -> tuple[str, int, int]:
    """``(items digest, block, blocks)`` of a clustering task (:func:`request_clustering`)."""
    parts = task.key.split(":")
    b, n = (task.payload or {}).get("block", [0, 1])
    return (parts[1] if len(parts) > 1 else task.key), int(b), int(n)


def clustering_tasks(corpus: Corpus, *, as_of=None) -> list[Task]:
    """The clustering tasks whose clusters are the corpus's cross-document identity: those of the newest generation
    whose every task is complete (in block order; empty without one).  Until a new generation is complete the
    previous one stays in use.  ``as_of``: those that were at that moment (a period's release)."""
    seen: dict[str, list[Task]] = {}
    done = Task.objects.filter(corpus=corpus, kind=Kind.CLUSTERS, status=Task.Status.COMPLETE)
    for t in (done if as_of is None else done.filter(completed__lte=as_of)).order_by("-completed", "-id"):
        g, _, n = clustering_generation(t)
        seen.setdefault(g, []).append(t)
        if len(seen[g]) == n:
            return sorted(seen[g], key=lambda x: clustering_generation(x)[1])
    return []


def nil_identity(corpus: Corpus) -> dict:
    """``(doc id, layer cluster) -> cross-document entity`` (``(task id, cluster number)``) from
    :func:`clustering_tasks` (empty without them)."""
    out = {}
    for task in clustering_tasks(corpus):
        items = task.payload.get("items", [])
        for g, members in enumerate((task.result or {}).get("clusters", [])):
            for i in members:
                if 0 <= i < len(items):
                    out[(items[i]["doc"], items[i]["cluster"])] = (task.pk, g)
    return out
