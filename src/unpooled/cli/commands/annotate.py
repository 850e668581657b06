"""``unpooled annotate status|simulate|request|documents|controls|aggregate|mturk|export``."""

from __future__ import annotations

import json
import sys

from ..main import PROBABILITY, SEED, CommandError, integer, number, setup_django
from unpooled.progress import progress_bar


def register(sub) -> None:
    p = sub.add_parser("annotate", help="annotation tasks: status, simulated crowd, requests, document samples")
    cs = p.add_subparsers(dest="annotate_command", metavar="ACTION")
    cs.required = True

    st = cs.add_parser("status", help="per task type: items, answers, cost, agreement; annotators")
    st.add_argument("--corpus", help="one corpus (default: all)")
    st.add_argument("--json", action="store_true", help="print the status as JSON")
    st.set_defaults(func=cmd_status)

    sim = cs.add_parser("simulate", help="answer every open task of a corpus with the simulated crowd")
    sim.add_argument("--corpus", required=True, help="the stored corpus whose open tasks are answered")
    sim.add_argument("--accuracy", type=PROBABILITY, default=0.8, help="each simulated annotator's accuracy (0.8)")
    sim.add_argument("--relation-accuracy", metavar="SPEC",
                     help="verification accuracy by relation, e.g. 'P108,P463=0.75/0.45; *=0.97/0.07' (relations no "
                          "group names: --accuracy)")
    sim.add_argument("--annotators", type=integer(1, 10_000), default=5, help="number of simulated annotators (5)")
    sim.add_argument("--bias", type=number(-1, 1), default=0.0, help="lean of errors towards 'correct' in [-1, 1] (0)")
    sim.add_argument("--latency", type=number(0, 86_400), default=10.0, help="mean seconds per answer (10)")
    sim.add_argument("--seed", type=SEED, default=0, help="random seed of the simulated crowd (0)")
    sim.add_argument("--max-answers", type=integer(1, 10_000_000), help="stop after this many answers (default: every open task)")
    sim.add_argument("--json", action="store_true", help="print the counts as JSON")
    sim.set_defaults(func=cmd_simulate)

    rq = cs.add_parser("request", help="sample a submission's instances and ask for their verification")
    rq.add_argument("submission", type=int, help="the submission's id (see submission list)")
    rq.add_argument("--sample", type=integer(1, 1_000_000), default=150, help="instances drawn uniformly without replacement (150)")
    rq.add_argument("--seed", type=SEED, default=0, help="random seed of the sample (0)")
    rq.add_argument("--json", action="store_true", help="print the request as JSON")
    rq.set_defaults(func=cmd_request)

    dc = cs.add_parser("documents", help="sample documents for exhaustive annotation")
    dc.add_argument("--corpus", required=True, help="the stored corpus to sample documents from")
    dc.add_argument("--scheme", choices=("uniform", "two-stage", "tfidf", "seed"), default="uniform",
                    help="uniform; two-stage (uniform, then by TF-IDF score against the first stage's entities); "
                         "tfidf (by TF-IDF score); or seed (20%% uniform, then up to 4 documents per query entity of "
                         "the annotated first stage, and a uniform share: run twice, like two-stage) (uniform)")
    dc.add_argument("--size", type=int, required=True, help="how many documents to sample")
    dc.add_argument("--seed", type=SEED, default=0, help="random seed of the sample (0)")
    dc.add_argument("--json", action="store_true", help="print the sample as JSON")
    dc.set_defaults(func=cmd_documents)

    ct = cs.add_parser("controls", help="create gold control items from the corpus's gold layer")
    ct.add_argument("--corpus", required=True, help="a stored corpus with a gold layer")
    ct.add_argument("-n", type=integer(1, 10_000), default=50, help="how many control items to create (50)")
    ct.add_argument("--seed", type=SEED, default=0, help="random seed of the choice of items (0)")
    ct.set_defaults(func=cmd_controls)

    mt = cs.add_parser("mturk", help="Mechanical Turk: publish open tasks as HITs, pay for answers, reconcile "
                                     "(sandbox unless UNPOOLED_MTURK_PRODUCTION=1; AWS credentials from the environment)")
    mt.add_argument("action", choices=("publish", "collect", "reconcile", "balance"),
                    help="publish open tasks as HITs, collect and pay answers, reconcile HITs with the database, or "
                         "show the account balance")
    mt.add_argument("--corpus", required=True, help="the stored corpus whose tasks are meant")
    mt.add_argument("--base-url", help="public URL of this service (publish)")
    mt.add_argument("--expire-orphans", action="store_true", help="reconcile: expire HITs of ours the database lost")
    mt.set_defaults(func=cmd_mturk)

    ag = cs.add_parser("aggregate", help="re-fit Dawid–Skene over all verification answers")
    ag.add_argument("--corpus", required=True, help="the stored corpus whose answers are aggregated")
    ag.set_defaults(func=cmd_aggregate)

    ex = cs.add_parser("export", help="write the label pool, every answer and the exhaustive annotations as a "
                                      "dataset release (JSONL files and a README with counts)")
    ex.add_argument("--corpus", required=True, help="the stored corpus whose annotations are released")
    ex.add_argument("-o", "--output", required=True, metavar="DIR",
                    help="folder to write the release into (created if missing), or a file name ending in .zip")
    ex.add_argument("--licence", help="licence of the annotations, stated in the README (default: CC BY 4.0)")
    ex.add_argument("--force", action="store_true", help="replace release files already in DIR")
    ex.add_argument("--json", action="store_true", help="print the counts as JSON")
    ex.set_defaults(func=cmd_export)


def _corpus(name: str):
    from unpooled.service.corpora.models import Corpus

    try:
        return Corpus.objects.select_related("schema").get(name=name)
    except Corpus.DoesNotExist:
        names = ", ".join(Corpus.objects.values_list("name", flat=True)) or "none yet"
        raise CommandError(f"--corpus {name!r}: no such corpus (stored: {names})") from None


def _opt(x) -> str:
    """A number, or '-' where it is undefined (e.g. agreement when every answer is one class)."""
    return "-" if x is None else str(x)


def _money(cents) -> str:
    return "-" if cents is None else f"${cents / 100:,.2f}"


def cmd_status(args) -> int:
    setup_django()
    from unpooled.service.annotation.status import status

    corpus = _corpus(args.corpus) if args.corpus else None
    st = status(corpus)
    if args.json:
        print(json.dumps(st, indent=1))
        return 0
    head = f"corpus {st['corpus']}" if corpus else "all corpora"
    extra = f"; backend {st['backend']}, committed {_money(st['committed_cents'])} of budget {_money(st['budget_cents'])}" if corpus else ""
    print(f"{head}: {st['labels']:,} labelled instance keys, {st['leased']} leases out{extra}")
    # the console's columns and names: answers received / needed (counted, gold controls excluded), all answers
    print(f"{'task type':<10} {'items':>7} {'complete':>8} {'open':>6} {'received/needed':>15} {'all answers':>11} "
          f"{'controls':>8} {'cost':>10} {'per item':>9} {'s/answer':>8}")
    for k in st["kinds"]:
        got = f"{k['answers_received']:,}/{k['answers_needed']:,}"
        print(f"{k['kind']:<10} {k['items']:>7,} {k['complete']:>8,} {k['open']:>6,} {got:>15} {k['answers']:>11,} "
              f"{k['control_answers']:>8,} {_money(k['cost_cents']):>10} "
              f"{_money(k['cost_per_item_cents']) if k['cost_per_item_cents'] is not None else '-':>9} "
              f"{k['mean_seconds'] if k['mean_seconds'] is not None else '-':>8}")
    ov = st["agreement"]["overall"]
    print(f"verification agreement: Fleiss kappa {_opt(ov['fleiss_kappa'])}, Krippendorff alpha {_opt(ov['krippendorff_alpha'])} "
          f"({ov['items']:,} items, {ov['answers']:,} answers)")
    rel = st["agreement"]["by_relation"]
    if rel:
        print(f"{'relation':<28} {'items':>6} {'kappa':>7} {'alpha':>7}")
        for g, d in list(rel.items())[:40]:
            label = f"{g} {d['name']}" if d.get("name") else str(g)
            print(f"{label[:28]:<28} {d['items']:>6} {_opt(d['fleiss_kappa']):>7} {_opt(d['krippendorff_alpha']):>7}")
        if len(rel) > 40:
            print(f"... {len(rel) - 40} more relation types (--json for all)")
    if st["annotators"]:
        print(f"{'annotator':<28} {'answers':>7} {'cost':>9} {'controls':>8} {'ctrl acc':>8} {'agrees':>7}  blocked")
        for a in st["annotators"]:
            print(f"{a['annotator']:<28} {a['answers']:>7,} {_money(a['cost_cents']):>9} {a['controls']:>8} "
                  f"{_opt(a['control_accuracy']):>8} {_opt(a['agreement_with_label']):>7}  "
                  f"{'yes: ' + a['blocked_reason'] if a['blocked'] else 'no'}")
    return 0


def cmd_simulate(args) -> int:
    from .evaluate import relation_accuracy_option

    rates = relation_accuracy_option(args)
    setup_django()
    from unpooled.service.annotation.actions import reaggregate, settings_for
    from unpooled.service.annotation.models import Task
    from unpooled.service.crowd.simulated import SimulatedCrowd, exhaustive_accuracy, verification_accuracy

    corpus = _corpus(args.corpus)
    k = settings_for(corpus).answers_per_item
    if args.annotators < k:
        raise CommandError(f"--annotators {args.annotators}: each item needs {k} different annotators")
    if not corpus.has_gold:
        raise CommandError(f"corpus {corpus.name} has no gold layer: the simulated crowd answers from it")
    crowd = SimulatedCrowd.uniform(corpus, args.annotators, accuracy=args.accuracy, bias=args.bias,
                                   latency=args.latency, rng=args.seed, relation_rates=rates)
    open_tasks = Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, is_control=False).count()
    with progress_bar(desc="simulated answers", unit="answer", total=None) as bar:
        report = crowd.run(max_answers=args.max_answers, progress=bar.update)
    written = reaggregate(corpus)
    left = Task.objects.filter(corpus=corpus, status=Task.Status.OPEN, is_control=False).count()
    out = {"corpus": corpus.name, "open_tasks_before": open_tasks, "open_tasks_after": left, **report.to_dict(),
           "dawid_skene_labels": written,
           "verification": {"majority": verification_accuracy(corpus, method="majority"),
                            "dawid_skene": verification_accuracy(corpus, method="dawid-skene")},
           "exhaustive": exhaustive_accuracy(corpus)}
    if args.json:
        print(json.dumps(out))
        return 0
    v = out["verification"]
    print(f"{report.answers:,} simulated answers ({', '.join(f'{k}: {n:,}' for k, n in report.by_kind.items())}); "
          f"blocked: {', '.join(report.blocked) or 'none'}")
    if left:
        print(f"{left:,} tasks still open: too few unblocked annotators answer them (each item needs {k} different "
              "ones); add annotators or lower the blocking threshold")
    print(f"verification labels vs gold: majority {v['majority']['accuracy']:.4f} on {v['majority']['items']:,} items, "
          f"Dawid-Skene {v['dawid_skene']['accuracy']:.4f} on {v['dawid_skene']['items']:,}")
    e = out["exhaustive"]
    if e["documents"]:
        print(f"exhaustive: {e['documents']} documents, mention recall {e['mention_recall']:.4f}, precision "
              f"{e['mention_precision']:.4f}; relation pairs {e['pairs']:,}, pair accuracy {e['pair_accuracy']:.4f}")
    return 0


def cmd_request(args) -> int:
    setup_django()
    import numpy as np

    from unpooled.service.annotation.actions import request_verification
    from unpooled.service.submissions.models import RelationInstance, Submission

    try:
        sub = Submission.objects.select_related("corpus").get(pk=args.submission)
    except Submission.DoesNotExist:
        raise CommandError(f"submission {args.submission}: no such submission") from None
    ids = np.array(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))
    if len(ids) == 0:
        raise CommandError(f"submission {sub.pk} has no instances")
    pick = np.random.default_rng(args.seed).choice(len(ids), size=min(args.sample, len(ids)), replace=False)
    res = request_verification(sub, ids[pick].tolist())
    if args.json:
        print(json.dumps(res.to_dict()))
    else:
        print(f"submission {sub.pk}: {res.keys} distinct instances sampled; {res.reused} already labelled (reused), "
              f"{res.joined} joined open tasks, {res.created} new tasks ({_money(res.committed_cents)} committed)"
              + (f"; {res.over_budget} not created: budget spent" if res.over_budget else ""))
    return 0


def cmd_documents(args) -> int:
    setup_django()
    from unpooled.core.sampling import small_sample_warning
    from unpooled.service.annotation.sampling import sample_documents

    corpus = _corpus(args.corpus)
    sample, made = sample_documents(corpus, args.scheme, args.size, seed=args.seed)
    warning = small_sample_warning(args.scheme, args.size, corpus.n_documents)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    out = {"corpus": corpus.name, "scheme": args.scheme, "sampled": int(len(sample.indices)), "new_documents": made}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['sampled']} documents sampled ({args.scheme}), {made} new: one entity task each")
    return 0


def cmd_controls(args) -> int:
    setup_django()
    from unpooled.service.annotation.controls import create_verify_controls

    corpus = _corpus(args.corpus)
    made = create_verify_controls(corpus, args.n, rng=args.seed)
    print(f"{made} gold control items created for {corpus.name}", file=sys.stderr)
    return 0


def cmd_aggregate(args) -> int:
    setup_django()
    from unpooled.service.annotation.actions import reaggregate

    corpus = _corpus(args.corpus)
    print(f"{reaggregate(corpus)} Dawid-Skene labels written")
    return 0


def cmd_mturk(args) -> int:
    setup_django()
    from unpooled.service.crowd import mturk_sync
    from unpooled.service.crowd.mturk import MTurkBackend, MTurkError

    corpus = _corpus(args.corpus)
    backend = MTurkBackend.from_env()
    print(f"mturk: {'sandbox' if backend.config.sandbox else 'PRODUCTION'} ({backend.config.endpoint})",
          file=sys.stderr)
    try:
        if args.action == "publish":
            if not args.base_url:
                raise CommandError("--base-url: required to publish (workers open our task pages there)")
            out = mturk_sync.publish(corpus, backend, args.base_url).to_dict()
        elif args.action == "collect":
            out = mturk_sync.collect(corpus, backend).to_dict()
        elif args.action == "reconcile":
            out = mturk_sync.reconcile_corpus(corpus, backend, expire_orphans=args.expire_orphans)
        else:
            out = {"balance": backend.balance()}
    except MTurkError as exc:
        raise CommandError(str(exc)) from None
    print(json.dumps(out))
    return 0


def cmd_export(args) -> int:
    from pathlib import Path

    out = Path(args.output)
    as_zip = out.suffix.lower() == ".zip"
    if as_zip and out.exists() and not args.force:
        raise CommandError(f"-o {out}: the file exists; use --force to replace it")
    if not as_zip and out.exists() and not out.is_dir():
        raise CommandError(f"-o {out}: not a folder (give a folder, or a file name ending in .zip)")
    setup_django()
    from unpooled.service.annotation.release import DEFAULT_LICENCE, RELEASE_FILES, export_release, write_release_zip

    corpus = _corpus(args.corpus)
    licence = args.licence or DEFAULT_LICENCE
    if as_zip:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "wb") as fh:
            counts = write_release_zip(corpus, fh, licence=licence)
    else:
        there = [name for name in RELEASE_FILES if (out / name).exists()]
        if there and not args.force:
            raise CommandError(f"-o {out}: {out / there[0]} exists (a release is there already); "
                               "use --force to replace it")
        counts = export_release(corpus, out, licence=licence)
    if args.json:
        print(json.dumps({"output": str(out), **counts.to_dict()}))
        return 0
    share = f"{counts.correct_share:.1%} correct" if counts.correct_share is not None else "none labelled"
    print(f"release of corpus {corpus.name} written to {out}: {counts.label_keys:,} labelled instance keys "
          f"({counts.label_rows:,} label rows, {share}), {counts.answers:,} answers by {counts.annotators:,} "
          f"annotators, {counts.exhaustive_complete:,} of {counts.exhaustive_documents:,} exhaustive documents "
          f"complete ({counts.exhaustive_relations:,} true instances)")
    return 0
