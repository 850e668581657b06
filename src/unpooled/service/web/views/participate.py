"""Taking part: a corpus's "Participate" page (format, schema, sample file, the three ways to submit), its
schema page and the sample file."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render

from unpooled.service.accounts import actions as accounts
from unpooled.service.corpora.models import Corpus

from .. import participate


def _corpus(name: str) -> Corpus:
    return get_object_or_404(Corpus.objects.select_related("schema"), name=name)


def _gold_shown(request, corpus: Corpus) -> bool:
    """The examples and the sample file come from the gold layer: shown only to whom it is
    (:func:`~unpooled.service.annotation.layers.gold_visible`); otherwise the pages show the format alone."""
    from unpooled.service.annotation.layers import gold_visible

    return gold_visible(corpus, request.user)


def participate_page(request, name: str):
    import json

    corpus = _corpus(name)
    schema = corpus.schema.schema()
    sample = participate.sample_instances(corpus, 1) if _gold_shown(request, corpus) else []
    return render(request, "web/participate.html", {
        "corpus": corpus, "schema": schema,
        "example_json": json.dumps(sample[0], ensure_ascii=False) if sample else "",
        "example_tac": participate.sample_tac(sample[0]) if sample else "",
        "base": request.build_absolute_uri("/").rstrip("/"), "wait_seconds": int(settings.UPLOAD_WAIT_SECONDS),
        "n_relations": len(schema.canonical_relations), "n_predicates": len(schema.relations),
        "team": accounts.team_of(request.user), "role": accounts.role_of(request.user)})


def schema_page(request, name: str):
    corpus = _corpus(name)
    schema = corpus.schema.schema()
    rows = participate.schema_rows(corpus, examples=_gold_shown(request, corpus))
    return render(request, "web/schema.html", {"corpus": corpus, "schema": schema, "rows": rows,
                                               "entity_types": sorted(schema.entity_types.items()),
                                               "value_types": sorted(schema.value_types.items())})


def sample_file(request, name: str):
    corpus = _corpus(name)
    body = participate.sample_jsonl(corpus) if _gold_shown(request, corpus) else ""
    resp = HttpResponse(body, content_type="application/jsonl; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="{corpus.name}-sample.jsonl"'
    return resp
