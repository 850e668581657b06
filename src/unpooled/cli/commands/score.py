"""``unpooled score``: precision, recall and F1 offline, from labels you already have.

Inputs (formats in :mod:`unpooled.core.offline`): a folder of submissions (one
``NAME.jsonl`` per system), a labels file (one labelled draw a line, attributed to
the system whose sampling distribution drew it) and an exhaustive file (true
instances of exhaustively annotated documents).  No database.  Two options describe how the
exhaustive sample was collected: ``--exhaustive-documents N`` (how many documents were annotated,
counting those without a true instance; recall's variance is that of a cluster sample of
documents) and ``--corpus PATH`` (the current corpus the exhaustive sample was drawn from: the
protocol pairs mentions within one sentence, so p0 is 0 for pooled instances across sentences, and
for labelled draws on documents no longer in the corpus, which count for precision only).
``--recall-protocol document`` counts every fact between two entity clusters of a document instead
(DocRED-style corpora; :mod:`unpooled.core.estimators.exhaustive`, 4); the report names the protocol.

Exit status: 0 scored; 1 located problems in the input files (printed as
``path:line:col: CODE message``, like ``unpooled validate``); 2 usage; 3 other
input errors (a missing file or folder, no submissions, an inconsistent option).
"""

from __future__ import annotations

import json
import math
import sys

from ..main import REPLICATES, SEED, Exit, integer
from unpooled.core.names import CORPUS_FORMATS, ESTIMATORS, LEVELS, MATCHES, PROTOCOL_LABELS, RECALL_PROTOCOLS, WEIGHTS


def register(sub) -> None:
    p = sub.add_parser(
        "score", help="estimate P/R/F1 offline from submissions, labels and an exhaustive sample",
        description="Score systems offline. --submissions is a folder with one NAME.jsonl per system; --labels has "
                    "one labelled draw a line ({system, instance or key, label}); --exhaustive one true instance a "
                    "line from exhaustively annotated documents ({instance or key, weight?, inclusion?}).",
    )
    p.add_argument("--labels", required=True, metavar="L.jsonl", help="labelled draws")
    p.add_argument("--submissions", required=True, metavar="DIR", help="folder of NAME.jsonl submissions")
    p.add_argument("--exhaustive", required=True, metavar="E.jsonl", help="exhaustively found true instances")
    p.add_argument("--level", choices=LEVELS, default="instance",
                   help="sampling distribution p_i the draws came from (default: instance)")
    p.add_argument("--estimator", choices=ESTIMATORS, default="joint", help="default: joint")
    p.add_argument("--weights", choices=WEIGHTS, default="balance",
                   help="weights of the joint estimator (default: balance)")
    p.add_argument("--match", choices=MATCHES, default="exact",
                   help="recall matching policy (default: exact)")
    p.add_argument("--exhaustive-documents", type=integer(1, 10_000_000), default=None, metavar="N",
                   help="number of exhaustively annotated documents, counting those without a true instance "
                        "(default: the documents of the exhaustive file, with a warning)")
    p.add_argument("--corpus", default=None, metavar="PATH",
                   help="the current corpus (file or folder), which the exhaustive sample was drawn from: p0 is "
                        "restricted to instances within one sentence, as the exhaustive protocol annotates, and to "
                        "its documents (labels kept from documents no longer in it count for precision only, with a "
                        "warning) (default: no restriction, with a warning)")
    p.add_argument("--corpus-format", choices=CORPUS_FORMATS, default=None,
                   help="format of --corpus (detected when omitted)")
    p.add_argument("--recall-protocol", choices=RECALL_PROTOCOLS, default="sentence",
                   help="which true instances recall counts: 'sentence', those whose arguments share a sentence "
                        "(the exhaustive sample pairs mentions within sentences); 'document', every fact between two "
                        "entity clusters of a document, cross-sentence ones included (needs --corpus with entity "
                        "clusters, e.g. docred, and an exhaustive file annotated over whole documents; a pooled "
                        "instance matches a fact through any mention of its clusters) (default: sentence)")
    p.add_argument("--answers", default=None, metavar="A.jsonl",
                   help="the verification answers behind the labels (a release's answers.jsonl: task, annotator, "
                        "correct, key; gold controls with control and gold): the estimates then come from the votes, "
                        "with each annotator's error rates fitted by Dawid-Skene (gold controls held at their "
                        "answers) and their uncertainty in the intervals, as the service scores")
    p.add_argument("--replicates", type=integer(0, 10_000), default=100, metavar="N",
                   help="with --answers: bootstrap re-fits of the annotators' error rates (default: 100)")
    p.add_argument("--bootstrap", type=REPLICATES, default=0, metavar="N", help="bootstrap replicates (default: 0)")
    p.add_argument("--confidence", type=float, default=0.9, help="interval level (default: 0.9)")
    p.add_argument("--seed", type=SEED, default=None, help="seed of the bootstrap")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true",
                     help="print a JSON list of per-system rows (located input problems: a JSON object with 'ok' "
                          "false and each file's report)")
    out.add_argument("--csv", action="store_true",
                     help="print the per-system rows as CSV: the JSON rows' fields (without ppi and sample) and the "
                          "row's warnings (cells a spreadsheet would run as formulas are written as text, with a "
                          "leading ')")
    p.set_defaults(func=cmd_score)


def _fmt(v: float) -> str:
    return "n/a" if v is None or math.isnan(v) else f"{v:.3f}"


def _cell(est: float, lo: float, hi: float) -> str:
    if math.isnan(est):
        return "n/a"
    return f"{est:.3f} [{_fmt(lo)}, {_fmt(hi)}]"


def write_table(result, out) -> None:
    """The per-system table (text output)."""
    o = result.options
    pct = f"{o['confidence'] * 100:g}%"
    d = result.design
    extra = ""
    if o.get("documents") is not None:
        extra += f"; {o['documents']} exhaustive documents" + ("" if o.get("documents_given") else " (with a true "
                                                                                                    "instance)")
    if o.get("sentences"):
        extra += f"; p0 within one sentence of the corpus's documents ({o['outside_p0']} of {len(d.src)} draws outside)"
    out.write(f"estimator {result.scores.method}, level {o['level']}, match {o['match']}, "
              f"recall: {PROTOCOL_LABELS[o.get('recall_protocol', 'sentence')]}: "
              f"{len(result.systems)} systems, {len(d.src)} labelled draws, {d.n0} exhaustive true instances; "
              f"intervals {pct}{extra}\n")
    head = ["system", f"P [{pct}]", f"R [{pct}]", f"F1 [{pct}]", "labels", "ESS", "warnings"]
    body = []
    for r in result.rows:
        body.append([r.system, *(_cell(e.value, e.lo, e.hi) for e in (r.precision, r.recall, r.f1)),
                     str(r.labels), f"{r.ess:.1f}", "; ".join(r.warnings) or "-"])
    widths = [max(len(row[k]) for row in [head, *body]) for k in range(len(head) - 1)]
    for row in [head, *body]:
        cells = [c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths))]
        out.write("  ".join(cells) + "  " + row[-1] + "\n")
    if result.ppi is not None:
        write_ppi(result, out, pct)
    if o["bootstrap"]:
        out.write(f"\nbootstrap percentile intervals ({o['bootstrap']} replicates, {pct}):\n")
        bhead = ["system", "P", "R", "F1"]
        brows = [[r.system, *(f"[{_fmt(r.boot[k].lo)}, {_fmt(r.boot[k].hi)}]" for k in ("p", "r", "f1"))]
                 for r in result.rows]
        bw = [max(len(row[k]) for row in [bhead, *brows]) for k in range(4)]
        for row in [bhead, *brows]:
            out.write("  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, bw)))
                      .rstrip() + "\n")
    for w in result.warnings:
        out.write(f"warning: {w}\n")


def write_ppi(result, out, pct: str) -> None:
    """The prediction-powered precision beside the label-only one, marked as such (shown, not used)."""
    q = result.ppi
    out.write(f"\nprediction-powered precision (PPI++, the submitted confidences as control variates; shown beside "
              f"the label-only P, not used in the table above) [{pct}]:\n")
    for i, r in enumerate(result.rows):
        if not r.precision.defined:
            out.write(f"  {r.system}: n/a\n")
            continue
        e, el = q.p[i], q.labels[i]
        w, wl = e.interval.width, el.interval.width
        gain = f"{100 * (1 - w / wl):.0f}% narrower" if wl > 0 and q.lam[i] != 0 else "labels alone (lambda 0)"
        out.write(f"  {r.system}: P_ppi {_cell(e.value, e.lo, e.hi)} against labels alone "
                  f"{_cell(el.value, el.lo, el.hi)}; lambda {q.lam[i]:.3g}, mean "
                  f"confidence {q.conf_mean[i]:.3f}; {gain}\n")


def cmd_score(args) -> int:
    from unpooled.core.errors import InvalidInputError
    from unpooled.core.kb.lines import Limits
    from unpooled.core.offline import load, score

    from ..main import CommandError

    if not 0 < args.confidence < 1:
        raise CommandError(f"--confidence must be in (0, 1), got {args.confidence}")
    if args.corpus_format is not None and args.corpus is None:
        raise CommandError("--corpus-format needs --corpus")
    data = load(args.labels, args.submissions, args.exhaustive, corpus=args.corpus, corpus_format=args.corpus_format,
                limits=Limits.from_env())
    if not data.ok:
        bad = [r for r in data.reports if not r.ok]
        if args.json:
            print(json.dumps({"ok": False, "reports": [r.to_dict() for r in bad]}, ensure_ascii=False))
        else:
            for r in bad:
                r.write_text(sys.stdout)
        return Exit.FINDINGS
    # located warnings (duplicates) go to standard error, ruff-style
    for r in data.reports:
        for d in r.warnings:
            print(d.format(), file=sys.stderr)
    votes, fitted = None, None
    if args.answers is not None:
        votes, fitted = _votes(args)
        if votes is None:
            return Exit.FINDINGS
    try:
        result = score(data, level=args.level, estimator=args.estimator, weights=args.weights, match=args.match,
                       bootstrap=args.bootstrap, confidence=args.confidence, rng=args.seed,
                       documents=args.exhaustive_documents, votes=votes, recall_protocol=args.recall_protocol)
    except InvalidInputError as exc:
        msg = str(exc)
        if msg.startswith("documents: "):  # the core names its parameter; here it is the option
            msg = f"--exhaustive-documents {args.exhaustive_documents}: {msg[len('documents: '):]} ({args.exhaustive})"
        for name, option in (("recall_protocol", "--recall-protocol document"), ("match", "--match"),
                             ("entities", f"--recall-protocol document --corpus {args.corpus}")):
            if msg.startswith(f"{name}: "):
                msg = f"{option}: {msg[len(name) + 2:]}"
        raise CommandError(msg) from None
    write_output(result, args, fitted)
    return Exit.OK


def write_output(result, args, fitted: str | None) -> None:
    """The scores as ``--csv``, ``--json`` or the table, warnings to standard error (CSV, JSON) or after it."""
    from unpooled.core.csv_cells import write_csv

    raw = result.scores.raw
    rows = [{**r.to_dict(), "recall_protocol": args.recall_protocol} for r in result.rows]
    if args.csv:
        header = list(rows[0]) + ["warnings"]
        write_csv(sys.stdout, header, ([row.get(k) for k in header[:-1]] + ["; ".join(r.warnings)]
                                       for row, r in zip(rows, result.rows)), lineterminator="\n")
        for w in result.warnings:
            print(f"unpooled: warning: {w}", file=sys.stderr)
    elif args.json:
        if result.ppi is not None:
            for i, row in enumerate(rows):
                row["ppi"] = {**result.ppi.row(i), "method": result.ppi.p.method, "used": False}
        if raw is not None:
            for i, row in enumerate(rows):
                row["sample"] = {k: None if math.isnan(v[i]) else float(v[i]) for k, v in raw.items()}
                row["crowd_rates"] = {"source": fitted, **result.scores.rates}
        print(json.dumps(rows, ensure_ascii=False))
        for r in result.rows:
            for w in r.warnings:
                print(f"unpooled: warning: {r.system}: {w}", file=sys.stderr)
        for w in result.warnings:
            print(f"unpooled: warning: {w}", file=sys.stderr)
    else:
        write_table(result, sys.stdout)
        if raw is not None:
            rates = result.scores.rates
            sys.stdout.write(f"\nfrom the votes: annotators' error rates by {fitted} (mean sensitivity "
                             f"{rates['sens']:.3f}, false-positive rate {rates['fpr']:.3f}); the labelled sample with "
                             "majority labels taken as certain gives:\n")
            for i, r in enumerate(result.rows):
                sys.stdout.write(f"  {r.system}: P {_fmt(raw['p'][i])}, R {_fmt(raw['r'][i])}, F1 {_fmt(raw['f1'][i])}\n")


def _votes(args):
    """``--answers``: the answers with fitted error rates (and the source), or (None, None) after printing the
    file's located problems."""
    from unpooled.core.annotation.confusion import fit_preferred, keyed_answers
    from unpooled.core.kb.lines import Limits
    from unpooled.core.offline import read_answers

    from ..main import CommandError

    answers, rep = read_answers(args.answers, limits=Limits.from_env())
    if not rep.ok:
        if args.json:
            print(json.dumps({"ok": False, "reports": [rep.to_dict()]}, ensure_ascii=False))
        else:
            rep.write_text(sys.stdout)
        return None, None
    got = fit_preferred(answers, replicates=args.replicates, rng=0)
    if got is None:
        raise CommandError(f"--answers {args.answers}: no verification answers to fit the annotators' error rates on")
    source, point, reps = got
    return keyed_answers(answers, point, reps), source
