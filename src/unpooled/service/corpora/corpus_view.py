"""A :class:`unpooled.core.kb.CorpusView` over a stored corpus (what validation reads)."""

from __future__ import annotations

from collections import OrderedDict

from django.db import connection

from .models import Corpus, Document, Sentence


def _rows(sql: str, pk: int) -> list[tuple]:
    """The rows of one parameterised query, without the ORM (validation asks once per document: a query
    set's compilation cost more than the query)."""
    with connection.cursor() as cur:
        cur.execute(sql, [pk])
        return cur.fetchall()


class DbCorpusView:
    """Document ids and lengths in memory; texts and sentences fetched on demand and cached."""

    def __init__(self, corpus: Corpus, *, cache_size: int = 4096) -> None:
        self.corpus = corpus
        self._meta = {d: (pk, n) for d, pk, n in Document.objects.filter(corpus=corpus).values_list("doc_id", "pk", "length")}
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._sents: OrderedDict[str, tuple[list[int], list[int]]] = OrderedDict()
        self._cache_size = cache_size
        q = connection.ops.quote_name
        d, s = Document._meta, Sentence._meta
        c = {n: q(s.get_field(n).column) for n in ("start", "end", "document", "index")}
        self._text_sql = f"SELECT {q(d.get_field('text').column)} FROM {q(d.db_table)} WHERE {q(d.pk.column)} = %s"
        self._sents_sql = (f"SELECT {c['start']}, {c['end']} FROM {q(s.db_table)} WHERE {c['document']} = %s "
                           f"ORDER BY {c['index']}")

    @property
    def name(self) -> str:
        """The corpus's name (validation messages name it)."""
        return self.corpus.name

    def __contains__(self, doc_id: str) -> bool:
        return doc_id in self._meta

    def __len__(self) -> int:
        return len(self._meta)

    def pk(self, doc_id: str) -> int:
        return self._meta[doc_id][0]

    def length(self, doc_id: str) -> int:
        return self._meta[doc_id][1]

    def text(self, doc_id: str) -> str:
        got = self._texts.get(doc_id)
        if got is None:
            if not self._texts and len(self._meta) <= self._cache_size:
                # small corpus: one query for every text
                self._texts.update(Document.objects.filter(corpus=self.corpus).values_list("doc_id", "text"))
                return self._texts[doc_id]
            (got,), = _rows(self._text_sql, self.pk(doc_id))
            self._texts[doc_id] = got
            if len(self._texts) > self._cache_size:
                self._texts.popitem(last=False)
        return got

    def sentences(self, doc_id: str) -> tuple[list[int], list[int]]:
        got = self._sents.get(doc_id)
        if got is None:
            rows = _rows(self._sents_sql, self.pk(doc_id))
            got = ([s for s, _ in rows], [e for _, e in rows])
            self._sents[doc_id] = got
            if len(self._sents) > self._cache_size:
                self._sents.popitem(last=False)
        return got
