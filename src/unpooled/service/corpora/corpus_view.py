"""A :class:`unpooled.core.kb.CorpusView` over a stored corpus (what validation reads)."""

from __future__ import annotations

from collections import OrderedDict

from .models import Corpus, Document, Sentence


class DbCorpusView:
    """Document ids and lengths in memory; texts and sentences fetched on demand and cached."""

    def __init__(self, corpus: Corpus, *, cache_size: int = 4096) -> None:
        self.corpus = corpus
        self._meta = {d: (pk, n) for d, pk, n in Document.objects.filter(corpus=corpus).values_list("doc_id", "pk", "length")}
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._sents: OrderedDict[str, tuple[list[int], list[int]]] = OrderedDict()
        self._cache_size = cache_size

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
            got = Document.objects.values_list("text", flat=True).get(pk=self.pk(doc_id))
            self._texts[doc_id] = got
            if len(self._texts) > self._cache_size:
                self._texts.popitem(last=False)
        return got

    def sentences(self, doc_id: str) -> tuple[list[int], list[int]]:
        got = self._sents.get(doc_id)
        if got is None:
            rows = list(Sentence.objects.filter(document_id=self.pk(doc_id)).order_by("index").values_list("start", "end"))
            got = ([s for s, _ in rows], [e for _, e in rows])
            self._sents[doc_id] = got
            if len(self._sents) > self._cache_size:
                self._sents.popitem(last=False)
        return got
