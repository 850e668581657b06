"""``unpooled corpus load|list|analyse``."""

from __future__ import annotations

import json
import sys

from ..main import SEED, integer, setup_django
from unpooled.progress import progress_bar

from unpooled.core.corpus import FORMATS


def register(sub) -> None:
    p = sub.add_parser("corpus", help="load and list corpora")
    cs = p.add_subparsers(dest="corpus_command", metavar="ACTION")
    cs.required = True
    load = cs.add_parser("load", help="load documents from a file or folder into a new corpus")
    load.add_argument("path", help="a corpus file or folder (DocRED JSON, TAC source XML folder, JSONL)")
    load.add_argument("--format", choices=FORMATS, help="source format (detected when omitted)")
    load.add_argument("--name", required=True, help="corpus name (letters, digits, - and _)")
    load.add_argument("--schema", help="relation schema: tac-kbp, docred or a schema JSON file "
                                       "(default: docred for DocRED sources, else tac-kbp)")
    load.add_argument("--title", default="", help="a human title shown on the corpus page")
    load.add_argument("--json", action="store_true", help="print the stored corpus as JSON")
    load.set_defaults(func=cmd_load)
    ls = cs.add_parser("list", help="list stored corpora")
    ls.add_argument("--json", action="store_true", help="print the corpora as JSON")
    ls.set_defaults(func=cmd_list)
    an = cs.add_parser("analyse", help="what each document-sampling scheme samples: entity frequency, clusters, "
                                      "relation types (seed 000's figures)",
                       description="Per scheme: entities by the number of documents mentioning them (low / medium / "
                                   "high at the corpus's 50th and 90th percentiles), how many appear in more than one "
                                   "sampled document, and the sample's relation types against the corpus's. NAME is "
                                   "a stored corpus, or a corpus file or folder (read offline, no database).")
    an.add_argument("name", metavar="NAME", help="a stored corpus, or a path to corpus files")
    an.add_argument("--format", choices=FORMATS, help="source format of a path (detected when omitted)")
    an.add_argument("--scheme", action="append", choices=("uniform", "two-stage", "tfidf", "seed"),
                    help="a scheme to analyse (repeat for several; default all four)")
    an.add_argument("--size", type=integer(1, 10_000_000), default=100, help="documents per sample (default 100, at most the corpus)")
    an.add_argument("--draws", type=integer(1, 100), default=3, help="samples per scheme, averaged (default 3)")
    an.add_argument("--seed", type=SEED, default=0, help="random seed of the samples (default 0)")
    an.add_argument("--svg", metavar="DIR", help="also write the figures as SVG files into DIR")
    an.add_argument("--json", action="store_true", help="the figures as JSON instead of tables")
    an.set_defaults(func=cmd_analyse)
    au = cs.add_parser("audit", help="what reproduces a corpus's samples: the installation's sampling secret and how "
                                     "each sample's seed is made (JSON; share it with the auditor only)")
    au.add_argument("name", metavar="NAME", help="a stored corpus")
    au.set_defaults(func=cmd_audit)


def cmd_load(args) -> int:
    import re

    from unpooled.core.corpus import detect_format

    from ..main import CommandError

    if not re.fullmatch(r"[A-Za-z0-9_-]+", args.name):
        raise CommandError(f"--name {args.name!r}: use letters, digits, '-' and '_' only")
    fmt = args.format or detect_format(args.path)
    setup_django()
    from unpooled.service.corpora.actions import do_load_corpus

    with progress_bar(desc=f"loading {args.name}", unit="doc") as bar:
        corpus = do_load_corpus(args.path, fmt, args.name, schema=args.schema, title=args.title, progress=bar.update)
    row = _row(corpus)
    if args.json:
        print(json.dumps(row))
    else:
        print(f"loaded corpus {corpus.name}: {row['documents']:,} documents, {row['sentences']:,} sentences, "
              f"{row['gold_relations']:,} gold relations; schema {row['schema']}")
    return 0


def _row(c) -> dict:
    return {"name": c.name, "title": c.title, "format": c.source_format, "schema": c.schema.name,
            "documents": c.n_documents, "sentences": c.n_sentences, "gold_relations": c.n_gold_relations,
            "source": c.source}


def cmd_list(args) -> int:
    setup_django()
    from unpooled.service.corpora.models import Corpus

    rows = [_row(c) for c in Corpus.objects.select_related("schema")]
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no corpora yet: `unpooled corpus load PATH --format docred --name NAME`", file=sys.stderr)
        return 0
    print(f"{'name':<24} {'format':<7} {'schema':<26} {'documents':>9} {'gold rel.':>9}")
    for r in rows:
        print(f"{r['name']:<24} {r['format']:<7} {r['schema']:<26} {r['documents']:>9,} {r['gold_relations']:>9,}")
    return 0


def cmd_audit(args) -> int:
    """``unpooled corpus audit NAME``: the sampling secret and the seeds of the corpus's samples, as JSON.

    Whoever can run this can read the data directory (0700), which holds the secret anyway."""
    setup_django()
    from django.conf import settings

    from unpooled.service.annotation.models import ExhaustiveDocument
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.evaluations.lifecycle import sampling_key
    from unpooled.service.evaluations.policy import SERVICE_LEVELS

    from ..main import CommandError

    corpus = Corpus.objects.filter(name=args.name).first()
    if corpus is None:
        raise CommandError(f"{args.name!r}: no such corpus (see `unpooled corpus list`)")
    sample = sorted(ExhaustiveDocument.objects.filter(corpus=corpus).values_list("scheme", "stage", "sample_seed")
                    .distinct())
    print(json.dumps({
        "corpus": corpus.name, "sampling_secret": settings.SAMPLING_SECRET, "sampling_key": sampling_key(),
        "exhaustive_documents": [{"scheme": s, "stage": st, "seed": seed} for s, st, seed in sample],
        "draws": "numpy.random.default_rng([sampling_key, submission id, level index, draws before]); levels "
                 + ", ".join(f"{lv} {i}" for i, lv in enumerate(SERVICE_LEVELS)),
        "reproduce": "UNPOOLED_SAMPLING_SECRET=<sampling_secret> gives another installation the same samples; "
                     "unpooled evaluate --seed S draws from S alone"}, indent=1))
    print("the sampling secret lets its holder predict the samples of submissions to come: give it to the auditor "
          "only, and set a new UNPOOLED_SAMPLING_SECRET afterwards if they may submit", file=sys.stderr)
    return 0


def cmd_analyse(args) -> int:
    """``unpooled corpus analyse NAME``: the document-sample figures per scheme, as tables (and SVG)."""
    import time
    from pathlib import Path

    from unpooled.core.errors import InvalidInputError
    from unpooled.core.sampling.analysis import SCHEMES, analyse_schemes, figures_svg, format_tables

    from ..main import CommandError

    schemes = tuple(dict.fromkeys(args.scheme or SCHEMES))
    t0 = time.perf_counter()
    path = Path(args.name)
    if path.exists():
        from unpooled.core.corpus import detect_format, iter_documents
        from unpooled.core.sampling.seed import NAMED_TYPES

        docs = list(iter_documents(path, args.format or detect_format(str(path))))
        texts = [d.text for d in docs]
        names = [[e.name for e in d.entities if e.type.upper() in NAMED_TYPES] for d in docs]
        rels = [[r.predicate for r in d.relations] for d in docs] if any(d.relations for d in docs) else None
        label, source = str(path), "gold" if any(names) else "none"
    else:
        setup_django()
        from unpooled.service.corpora.models import Corpus
        from unpooled.service.organiser.documents import corpus_inputs

        corpus = Corpus.objects.filter(name=args.name).first()
        if corpus is None:
            raise CommandError(f"no corpus or file {args.name!r} (`unpooled corpus list` shows the stored corpora)")
        inp = corpus_inputs(corpus)
        texts, names, rels, label, source = inp["texts"], inp["names"], inp["relations"], corpus.name, inp["source"]
    if not texts:
        raise CommandError(f"{args.name}: no documents")
    t1 = time.perf_counter()
    size = min(args.size, len(texts))
    try:
        with progress_bar(total=len(schemes) * args.draws, desc="analysing", unit="sample") as bar:
            corpus_e, analyses = analyse_schemes(texts, names, rels, schemes=schemes, size=size, draws=args.draws,
                                                 rng=args.seed, progress=bar.update)
    except InvalidInputError as exc:
        raise CommandError(str(exc)) from None
    t2 = time.perf_counter()
    if args.svg:
        out = Path(args.svg)
        out.mkdir(parents=True, exist_ok=True)
        for k, svg in figures_svg(corpus_e, analyses).items():
            (out / f"{k}.svg").write_text(svg, encoding="utf-8")
    secs = {"read": round(t1 - t0, 2), "analyse": round(t2 - t1, 2)}
    if args.json:
        print(json.dumps({"corpus": label, "entities_from": source, "size": size, "draws": args.draws,
                          "thresholds": list(corpus_e.thresholds), "analyses": [a.to_dict() for a in analyses],
                          "seconds": secs}))
        return 0
    print(f"{label}: {len(schemes)} scheme(s), {args.draws} sample(s) of {size} documents each, seed {args.seed}; "
          f"entities from {'the gold layer' if source == 'gold' else source}")
    if source == "none":
        print("no entities: the corpus has no gold layer and nothing is annotated yet", file=sys.stderr)
    print(format_tables(corpus_e, analyses))
    print(f"\nread {secs['read']} s, analysed {secs['analyse']} s" + (f"; SVG in {args.svg}" if args.svg else ""))
    return 0
