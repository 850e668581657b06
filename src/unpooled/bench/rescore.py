"""``unpooled bench rescore``: re-scoring a corpus of many submissions after a batch of new labels.

Builds, in the database named by ``DATABASE_URL`` (a fresh SQLite file by default):

* a synthetic corpus (:func:`unpooled.core.kb.synthetic.synthetic_corpus`) with about twice
  ``--instances`` true relation instances;
* ``--systems`` JSONL submissions of about ``--instances`` instances each, ingested through
  :func:`~unpooled.service.submissions.actions.do_ingest_submission`: systems of a team share
  most of their correct instances, errors come from a shared pool of plausible wrong
  instances (popular mistakes recur across systems), and a few subject spans are shortened
  (distinct keys that match by overlap), with precisions spread over 0.55--0.95;
* ``--draws`` draws per system at the instance level
  (:func:`~unpooled.service.evaluations.draws.draw`), verification tasks for their keys
  with three simulated answers each (annotator accuracies 0.75--0.95) and majority labels,
  except for a reserve of drawn keys left unlabelled;
* ``--documents`` exhaustively annotated documents (completed relation tasks), at least ``--exhaustive``;
* with ``--exhaustive N``, an entity layer on N of them (:mod:`unpooled.bench.rescore_entities`: the simulated
  crowd's entity answers, their aggregated layer, a cross-document clustering), and the verification answers say
  whether the instances' arguments are mentions: the entity scores then have what they have in a shared task.

Then, in one process (as the task worker: BLAS on one thread unless ``OPENBLAS_NUM_THREADS`` says otherwise,
:func:`~unpooled.service.config.server.one_blas_thread`), it times: the from-scratch estimation
(``offline_data`` + the core's ``score``); a cold re-scoring (empty cache; builds it and writes one Score per
submission); one with nothing new; ``--repeats`` times, a batch of ``--labels`` new labels (answers + labels for
reserved drawn keys) followed by a re-scoring (the incremental one; the median is reported); and a re-scoring
after new draws of one system and after a new submission.  A re-scoring is what a label batch runs,
:func:`~unpooled.service.evaluations.publish.rescore`: the scores, then their breakdowns and the entity scores.
Each figure is split into the parts of :func:`unpooled.service.evaluations.scoring.score`
(pool, truth, draws, labels, confusions, design, estimate) and the rest (storing the Score
rows, the breakdowns, the entity scores).  The incremental estimates are checked against the
from-scratch ones (exit status 4 if they differ by more than 1e-9).  Every figure is wall
time measured here; the CPU time of the process and the load average are printed beside, and the entity scores'
part's wall and CPU seconds in a batch.  The entity scores are last computed again with every cache forgotten
(exit status 4 if they differ).
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from unpooled.bench import run_child
from unpooled.bench.rescore_entities import entity_layers, entity_values, max_difference, verification_item

SPAN_VARIANT = 0.05  # share of a system's correct instances given with a shortened subject span


# -- data ------------------------------------------------------------------------------------------
def load_generated_corpus(work: Path, n: int, seed: int, bench: str, title: str | None = None):
    """The generated corpus for about ``n`` instances a system (:func:`_corpus`), written to ``work`` and loaded as
    ``bench-<bench>-…``: the corpus and the generator's ``(docs, gold, wrong, spans, schema)``."""
    from unpooled.service.corpora.actions import do_load_corpus

    made = _corpus(n, seed)
    for d in made[0]:
        _TEXTS[d.id] = d.text
    path = work / "corpus.jsonl"
    with open(path, "w", encoding="utf-8") as out:
        for d in made[0]:
            out.write(json.dumps({"id": d.id, "text": d.text, "title": d.title, "sentences": d.sentences}) + "\n")
    corpus = do_load_corpus(path, "jsonl", f"bench-{bench}-{uuid.uuid4().hex[:8]}", **({"title": title} if title else {}))
    return corpus, made


def _corpus(n_instances: int, seed: int):
    """Documents, their true (canonical) instances and the candidate wrong ones, until enough truth."""
    import numpy as np

    from unpooled.core.kb.model import instance_key
    from unpooled.core.kb.synthetic import TEMPLATES, synthetic_corpus
    from unpooled.core.schema import builtin_schema

    schema = builtin_schema("tac-kbp")
    rng = np.random.default_rng(seed + 1)
    docs, gold, wrong, spans = [], [], [], {}
    for doc, ann in synthetic_corpus(10**6, rng=seed, n_entities=4000):
        if len(gold) >= 2 * n_instances:
            break
        docs.append(doc)
        mentions = []  # (type, text, start, end)
        holds = set()  # (predicate, subject text, object text)
        seen = set()
        for k, slots in ann:
            mentions.extend(slots)
            for a, pred, b in TEMPLATES[k][2]:
                canon, inv = schema.canonical_of(pred)
                s, o = (slots[b], slots[a]) if inv else (slots[a], slots[b])
                if schema.relations[canon].symmetric and (o[2], o[3]) < (s[2], s[3]):
                    s, o = o, s
                holds.add((canon, s[1], o[1]))
                if schema.relations[canon].symmetric:
                    holds.add((canon, o[1], s[1]))
                inst = _instance(doc.id, canon, s, o, schema)
                key = instance_key(*inst[:7])
                if key not in seen:
                    seen.add(key)
                    gold.append(inst)
        spans[doc.id] = mentions
        by_type: dict[str, list] = {}
        for m in mentions:
            by_type.setdefault(m[0], []).append(m)
        # plausible wrong instances: type-compatible mention pairs of the document that do not hold
        options = [("per:employee_or_member_of", "PER", "ORG"), ("per:schools_attended", "PER", "ORG"),
                   ("per:children", "PER", "PER"), ("per:spouse", "PER", "PER"), ("org:founded_by", "ORG", "PER"),
                   ("per:title", "PER", "TITLE")]
        for _ in range(3 * len(seen)):
            pred, ts, to = options[int(rng.integers(len(options)))]
            if not by_type.get(ts) or not by_type.get(to):
                continue
            s = by_type[ts][int(rng.integers(len(by_type[ts])))]
            o = by_type[to][int(rng.integers(len(by_type[to])))]
            if s[1] == o[1] or (pred, s[1], o[1]) in holds:
                continue
            if schema.relations[pred].symmetric and (o[2], o[3]) < (s[2], s[3]):
                s, o = o, s
            inst = _instance(doc.id, pred, s, o, schema)
            key = instance_key(*inst[:7])
            if key not in seen:
                seen.add(key)
                wrong.append(inst)
    return docs, gold, wrong, spans, schema


def _instance(doc: str, pred: str, s, o, schema):
    """(doc, s_start, s_end, pred, o_start, o_end, value, subject entity, object entity, s type, o type)."""
    from unpooled.core.kb.synthetic import entity_id

    value = o[1] if schema.relations[pred].string_valued else None
    return (doc, s[2], s[3], pred, o[2], o[3], value, entity_id(s[0], s[1]),
            None if value is not None else entity_id(o[0], o[1]), s[0], o[0])


def _systems(m: int, n: int, gold: list, wrong: list, seed: int):
    """Per system: a list of (instance, correct) of about ``n`` instances."""
    import numpy as np

    rng = np.random.default_rng(seed + 2)
    G, Wn = len(gold), len(wrong)
    teams = [rng.random(G) < 0.7 for _ in range(max(1, m // 5))]
    popularity = 1.0 / np.arange(1, Wn + 1) ** 0.7
    popularity /= popularity.sum()
    wrong_order = rng.permutation(Wn)
    out = []
    for i in range(m):
        size = int(n * rng.uniform(0.9, 1.1))
        prec = rng.uniform(0.55, 0.95)
        n_ok = min(int(size * prec), G)
        base = np.flatnonzero(teams[i % len(teams)])
        from_base = rng.choice(base, size=min(len(base), int(0.8 * n_ok)), replace=False)
        rest = np.setdiff1d(np.arange(G), from_base)
        ok = np.concatenate([from_base, rng.choice(rest, size=min(len(rest), n_ok - len(from_base)), replace=False)])
        n_bad = min(size - len(ok), Wn)
        bad = wrong_order[rng.choice(Wn, size=n_bad, replace=False, p=popularity)]
        rows = []
        for j in ok.tolist():
            inst = gold[j]
            name_len = inst[2] - inst[1]
            if inst[9] == "PER" and inst[3] != "per:spouse" and rng.random() < SPAN_VARIANT:
                first = _first_token_len(inst)
                if 0 < first < name_len:
                    inst = (inst[0], inst[1], inst[1] + first, *inst[3:])
            rows.append((inst, True))
        rows += [(wrong[j], False) for j in bad.tolist()]
        order = rng.permutation(len(rows))
        out.append([rows[k] for k in order.tolist()])
    return out


_TEXTS: dict = {}


def _first_token_len(inst) -> int:
    text = _TEXTS.get(inst[0], "")
    name = text[inst[1]:inst[2]]
    return name.find(" ") if " " in name else 0


def _write_system(path: Path, rows) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for inst, _ in rows:
            doc, ss, se, pred, os_, oe, value, se_id, oe_id, st, ot = inst
            obj = {"start": os_, "end": oe}
            if value is not None:
                obj["value"] = value
            else:
                obj["entity"] = oe_id
                obj["type"] = ot
            out.write(json.dumps({"doc": doc, "predicate": pred,
                                  "subject": {"start": ss, "end": se, "entity": se_id, "type": st},
                                  "object": obj}) + "\n")


# -- database writes ----------------------------------------------------------------------------------
class _Crowd:
    """Simulated answers written in bulk: three per verification task, majority labels."""

    def __init__(self, corpus, seed: int, k: int = 3, annotators: int = 12) -> None:
        import numpy as np

        from unpooled.service.annotation.models import Annotator, Backend

        self.corpus, self.k = corpus, k
        self.rng = np.random.default_rng(seed + 3)
        tag = uuid.uuid4().hex[:6]
        self.annotators = [Annotator.objects.create(backend=Backend.SIMULATED, external_id=f"bench-{tag}-{i:02d}")
                           for i in range(annotators)]
        self.accuracy = self.rng.uniform(0.75, 0.95, size=annotators)

    def label(self, items) -> int:
        """``items``: (key, key_hash, document pk, correct, payload, subject ok, object ok) of keys without a label
        (:func:`~unpooled.bench.rescore_entities.verification_item`); returns labels written."""
        from django.db import transaction
        from django.utils import timezone

        from unpooled.service.annotation.models import Answer, Assignment, Kind, Label, Task

        now = timezone.now()
        with transaction.atomic():
            tasks = Task.objects.bulk_create([
                Task(corpus=self.corpus, kind=Kind.VERIFY, document_id=doc, key=key, key_hash=kh, payload=payload,
                     answers_needed=self.k, status=Task.Status.COMPLETE, priority=now, guideline_version="bench",
                     completed=now) for key, kh, doc, _, payload, _, _ in items], batch_size=2000)
            assign, answers, labels = [], [], []
            for task, (key, kh, doc, truth, _, s_ok, o_ok) in zip(tasks, items):
                who = self.rng.choice(len(self.annotators), size=self.k, replace=False)
                says = [bool(truth) if self.rng.random() < self.accuracy[w] else not truth for w in who.tolist()]
                for w, s in zip(who.tolist(), says):
                    assign.append(Assignment(task=task, annotator=self.annotators[w], status="submitted",
                                             token=secrets.token_hex(16), leased=now, expires=now))
                    right = [bool(self.rng.random() < self.accuracy[w]) for _ in range(2)]
                    answers.append((s, s_ok == right[0], o_ok == right[1]))
                yes = sum(says)
                task.result = {"correct": 2 * yes > self.k, "votes": [yes, self.k - yes]}
                labels.append(Label(corpus=self.corpus, key=key, key_hash=kh, task=task, probability=yes / self.k,
                                    correct=2 * yes > self.k, method="majority", n_answers=self.k,
                                    annotators=[self.annotators[w].pk for w in who.tolist()],
                                    guideline_version="bench"))
            assign = Assignment.objects.bulk_create(assign, batch_size=2000)
            Answer.objects.bulk_create([
                Answer(assignment=a, task=a.task, annotator=a.annotator, value={"relation": "holds" if c else "none",
                                                                                 "subject_ok": so, "object_ok": oo},
                       correct=c, weight=1.0, guideline_version="bench") for a, (c, so, oo) in zip(assign, answers)],
                batch_size=2000)
            Task.objects.bulk_update(tasks, ["result"], batch_size=2000)
            Label.objects.bulk_create(labels, batch_size=2000)
        return len(labels)


def _exhaustive(corpus, docs, spans, gold, n_docs: int, seed: int) -> list[str]:
    """``n_docs`` documents sampled for exhaustive annotation, each with its completed relation task: their ids."""
    import numpy as np
    from django.utils import timezone

    from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Task
    from unpooled.service.corpora.models import Document

    rng = np.random.default_rng(seed + 4)
    pick = sorted(rng.choice(len(docs), size=min(n_docs, len(docs)), replace=False).tolist())
    pk = dict(Document.objects.filter(corpus=corpus).values_list("doc_id", "id"))
    truth_by_doc: dict[str, list] = {}
    for inst in gold:
        truth_by_doc.setdefault(inst[0], []).append(inst)
    now = timezone.now()
    inclusion = len(pick) / len(docs)
    for i in pick:
        d = docs[i].id
        mentions = [{"start": s, "end": e, "type": t} for t, _, s, e in spans[d]]
        at = {(m["start"], m["end"]): j for j, m in enumerate(mentions)}
        rels = [[at[(g[1], g[2])], g[3], at[(g[4], g[5])]] for g in truth_by_doc.get(d, [])]
        ExhaustiveDocument.objects.create(corpus=corpus, document_id=pk[d], scheme="uniform", stage=1,
                                          inclusion=inclusion, sample_seed=seed)
        Task.objects.create(corpus=corpus, kind=Kind.RELATIONS, document_id=pk[d], key="",
                            payload={"mentions": mentions, "pairs": []}, status=Task.Status.COMPLETE,
                            result={"pairs": {}, "relations": rels}, priority=now, completed=now,
                            guideline_version="bench")
    return [docs[i].id for i in pick]


# -- the benchmark (one process: the cache lives in it) ------------------------------------------------
def child(cfg: dict) -> None:
    from unpooled.service.config.bootstrap import setup_django

    setup_django(migrate=True)
    import numpy as np
    from django.db import connection

    from unpooled.core.kb.model import instance_key
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.evaluations import inputs, scoring
    from unpooled.service.evaluations.draws import draw
    from unpooled.service.submissions.models import RelationInstance

    m, n, seed = cfg["systems"], cfg["instances"], cfg["seed"]
    work = Path(cfg["workdir"])
    log = (lambda msg: print(msg, file=sys.stderr, flush=True)) if cfg.get("verbose") else (lambda msg: None)
    setup: dict[str, float] = {}
    t0 = time.perf_counter()
    corpus, (docs, gold, wrong, spans, schema) = load_generated_corpus(work, n, seed, "rescore")
    name = corpus.name
    systems = _systems(m + 1, n, gold, wrong, seed)  # the last one arrives later
    truth = {instance_key(*inst[:7]): ok for rows in systems for inst, ok in rows}
    setup["generate"] = time.perf_counter() - t0
    log(f"generated {len(docs)} documents, {len(gold)} true and {len(wrong)} wrong candidates")
    try:
        t0 = time.perf_counter()
        subs = _ingest(systems[:m], work, name)
        setup["ingest"] = time.perf_counter() - t0
        log(f"ingested {m} submissions in {setup['ingest']:.1f} s")
        t0 = time.perf_counter()
        rng = np.random.default_rng(seed + 5)
        crowd, first, reserve, ex_ids, layer = _labelled(corpus, subs, cfg, rng, truth, (docs, gold, spans))
        docs_ex = len(ex_ids)
        setup["draws_labels_exhaustive"] = time.perf_counter() - t0
        log(f"{len(first) + len(reserve)} drawn keys, {len(first)} labelled, {len(reserve)} in reserve; "
            f"{docs_ex} exhaustive docs")
        n_instances = RelationInstance.objects.filter(submission__corpus=corpus).count()

        # from scratch, then cold and incremental re-scorings
        corpus = Corpus.objects.get(pk=corpus.pk)

        t0 = time.perf_counter()
        scoring.from_scratch(corpus)
        scratch = time.perf_counter() - t0
        log(f"from scratch {scratch:.2f} s")
        scoring.clear_cache()
        cold = _timed(corpus)
        unchanged = _timed(corpus)
        log(f"cold {cold['seconds']:.2f} s, unchanged {unchanged['seconds']:.3f} s")
        n_universe = len(inputs.read(corpus).universe)
        batches = []
        for r in range(cfg["repeats"]):
            crowd.label(reserve[r * cfg["labels"]:(r + 1) * cfg["labels"]])
            batches.append(_timed(corpus))
            log(f"label batch {r + 1}: {batches[-1]['seconds']:.3f} s (scoring.score {batches[-1]['scoring']:.3f} s)")
        median = sorted(batches, key=lambda b: b["seconds"])[len(batches) // 2]
        diff = _difference(corpus)

        # new draws for one system (+ their labels), then a new submission
        draw(subs[0], cfg["labels"], level="instance", rng=rng)
        crowd.label_new(subs[0])
        after_draws = _timed(corpus)
        late = _ingest([systems[m]], work, name, team="late")[0]
        draw(late, cfg["draws"], level="instance", rng=rng)
        crowd.know(RelationInstance.objects.filter(submission=late))
        crowd.label_new(late)
        after_submission = _timed(corpus)
        diff = max(diff, _difference(corpus))
        # the entity scores with every cache forgotten: the same
        held = entity_values(corpus)
        scoring.clear_cache()
        entity_diff = max_difference(held, entity_values(corpus))

        result = {
            "database": connection.vendor, "systems": m, "instances_per_system": n, "instances": n_instances,
            "universe": n_universe, "draws_per_system": cfg["draws"], "labelled_keys": len(first),
            "exhaustive_documents": docs_ex, "entity_documents": min(cfg["exhaustive"], docs_ex),
            "entity_layer_mentions": layer, "label_batch": cfg["labels"], "repeats": cfg["repeats"],
            "from_scratch_seconds": round(scratch, 3),
            **_medians(batches),
            "entities_max_abs_difference": entity_diff,
            "rescore_median_batch": _rounded(median), "cold": _rounded(cold), "unchanged": _rounded(unchanged),
            "after_new_draws": _rounded(after_draws), "after_new_submission": _rounded(after_submission),
            "max_abs_difference": diff, "setup_seconds": {k: round(v, 1) for k, v in setup.items()},
            "loadavg": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
        }
        print(json.dumps(result))
    finally:
        if not cfg.get("keep"):
            _cleanup(name)


def _labelled(corpus, subs, cfg: dict, rng, truth: dict, generated) -> tuple:
    """Draw each submission's ``draws``, label all drawn keys but the ``labels x repeats`` kept in reserve for the
    batches, make the exhaustive documents (with an entity layer on ``exhaustive`` of them): the labeller, the keys
    labelled and in reserve, the exhaustive documents' ids, the entity layer's mentions."""
    from unpooled.service.evaluations.draws import draw
    from unpooled.service.evaluations.models import Draw

    docs, gold, spans = generated
    seed = cfg["seed"]
    for sub in subs:
        draw(sub, cfg["draws"], level="instance", rng=rng)
    drawn = list(dict.fromkeys(Draw.objects.filter(submission__corpus=corpus).order_by("id")
                               .values_list("key", flat=True)))
    crowd = _Labeller(corpus, seed, truth, spans)
    reserve_n = cfg["labels"] * cfg["repeats"]
    order = rng.permutation(len(drawn))
    reserve = [drawn[k] for k in order[:reserve_n].tolist()]
    first = [drawn[k] for k in order[reserve_n:].tolist()]
    crowd.label(first)
    ex_ids = _exhaustive(corpus, docs, spans, gold, max(cfg["documents"], cfg["exhaustive"]), seed)
    layer = entity_layers(corpus, ex_ids[:cfg["exhaustive"]], spans, crowd.crowd, seed) if cfg["exhaustive"] else 0
    return crowd, first, reserve, ex_ids, layer


def _difference(corpus) -> float:
    """The largest difference between the incremental scores and the from-scratch ones."""
    from unpooled.service.evaluations import scoring

    return scoring.max_abs_difference(scoring.score(corpus).result, scoring.from_scratch(corpus).result)


class _Labeller:
    """The bench's crowd labelling keys (:class:`_Crowd`): the keys' arguments (:meth:`know`), their truth, the
    generated mentions' spans; every key labelled once."""

    def __init__(self, corpus, seed: int, truth: dict, spans: dict) -> None:
        from unpooled.service.submissions.models import RelationInstance

        self.crowd, self.truth, self.args_of, self.done = _Crowd(corpus, seed), truth, {}, set()
        self.gold_spans = {(d, s, e) for d, ms in spans.items() for _, _, s, e in ms}
        self.know(RelationInstance.objects.filter(submission__corpus=corpus))

    def know(self, qs) -> None:
        for row in qs.values_list("key", "document_id", "document__doc_id", "subject_start", "subject_end",
                                  "object_start", "object_end", "value"):
            self.args_of[row[0]] = row[1:]

    def label(self, keys) -> None:
        from unpooled.core.kb.model import key_hash

        a = self.args_of
        self.crowd.label([verification_item(k, key_hash(k), a[k][0], self.truth[k], *a[k][1:], self.gold_spans)
                          for k in keys])
        self.done.update(keys)

    def label_new(self, sub) -> None:
        """Label the submission's drawn keys that have no label yet."""
        from unpooled.service.evaluations.models import Draw

        self.label([k for k in dict.fromkeys(Draw.objects.filter(submission=sub).values_list("key", flat=True))
                    if k not in self.done])


def _timed(corpus) -> dict:
    """One re-scoring as a label batch runs it (``publish.rescore``: the scores, their breakdowns and the entity
    scores): wall and CPU seconds, its parts (scoring.score's, then the rest) and the tables' growth."""
    from unpooled.service.evaluations.publish import rescore
    from unpooled.service.submissions.models import Submission

    size0 = _table_bytes()
    t0, c0 = time.perf_counter(), time.process_time()
    parts: dict[str, float] = {}
    cpu_parts: dict[str, float] = {}
    got = rescore(corpus, timings=parts, cpu=cpu_parts)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert len(got) == len(Submission.objects.filter(corpus=corpus))
    inc = sum(v for k, v in parts.items() if k not in ("store", "breakdowns", "entities"))
    size1 = _table_bytes()
    grown = {t: size1[t] - size0.get(t, 0) for t in size1 if size1[t] != size0.get(t, 0)}
    return {"seconds": wall, "cpu": cpu, "scoring": inc, "parts": parts, "cpu_parts": cpu_parts, "grown": grown}


def _rounded(b: dict) -> dict:
    return {"seconds": round(b["seconds"], 3), "cpu_seconds": round(b["cpu"], 3),
            "scoring_seconds": round(b["scoring"], 3), "parts": {k: round(v, 3) for k, v in b["parts"].items()},
            "cpu_parts": {k: round(v, 3) for k, v in b["cpu_parts"].items()}, "grown_bytes": b["grown"]}


def _medians(batches: list[dict]) -> dict:
    """The label batches' medians (and every batch's wall seconds)."""
    def med(get):
        return round(statistics.median(get(b) for b in batches), 3)

    return {"rescore_seconds": med(lambda b: b["seconds"]), "rescore_scoring_seconds": med(lambda b: b["scoring"]),
            "rescore_cpu_seconds": med(lambda b: b["cpu"]), "rescore_all": [round(b["seconds"], 3) for b in batches],
            "entities_seconds": med(lambda b: b["parts"]["entities"]),
            "entities_cpu_seconds": med(lambda b: b["cpu_parts"]["entities"])}


def _ingest(systems, work: Path, name: str, team: str = "") -> list:
    """The generated systems written and ingested into the corpus ``name``, five runs a team (``team``: one team of
    that name)."""
    from unpooled.service.submissions.actions import do_ingest_submission

    subs = []
    for i, rows in enumerate(systems):
        p = work / f"{team or 'sys'}{i:03d}.jsonl"
        _write_system(p, rows)
        res = do_ingest_submission(p, name, team or f"team{i // 5:02d}", f"run{i % 5}", "jsonl")
        if not res.ok:
            raise RuntimeError(f"system {i} rejected: {[d.format() for d in res.report.errors[:3]]}")
        subs.append(res.submission)
    return subs


def _table_bytes() -> dict[str, int]:
    """The bytes each table of the evaluations app takes (its rows and its indexes) in the database: SQLite's
    ``dbstat`` pages, PostgreSQL's ``pg_total_relation_size`` (dead rows too, until a vacuum)."""
    from django.apps import apps
    from django.db import connection

    tables = [m._meta.db_table for m in apps.get_app_config("evaluations").get_models()]
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SELECT t, pg_total_relation_size(t::regclass) FROM unnest(%s::text[]) AS t", [tables])
        else:
            marks = ",".join("?" * len(tables)).replace("?", "%s")
            cur.execute("SELECT m.tbl_name, SUM(d.pgsize) FROM dbstat d JOIN sqlite_master m ON m.name = d.name "
                        f"WHERE m.tbl_name IN ({marks}) GROUP BY m.tbl_name", tables)
        return {t: int(n or 0) for t, n in cur.fetchall()}


def _cleanup(name: str) -> None:
    """Remove the benchmark's corpus and everything under it (a shared database stays as it was)."""
    from django.db import transaction

    from unpooled.service.annotation.models import Annotator, Answer, Assignment, Label, Task
    from unpooled.service.corpora.models import Corpus
    from unpooled.service.evaluations.models import Breakdown, Draw, Score
    from unpooled.service.submissions.models import (
        RelationInstance, Submission, SubmissionEntity, SubmissionMention, Team,
    )

    corpus = Corpus.objects.filter(name=name).first()
    if corpus is None:
        return
    with transaction.atomic():
        ann = set(Answer.objects.filter(task__corpus=corpus).values_list("annotator_id", flat=True))
        subs = Submission.objects.filter(corpus=corpus)
        teams = set(subs.values_list("team_id", flat=True))
        for model, flt in ((Score, {"submission__corpus": corpus}), (Breakdown, {"submission__corpus": corpus}),
                           (Draw, {"submission__corpus": corpus}),
                           (Label, {"corpus": corpus}), (Answer, {"task__corpus": corpus}),
                           (Assignment, {"task__corpus": corpus}), (RelationInstance, {"submission__corpus": corpus}),
                           (SubmissionMention, {"submission__corpus": corpus}),
                           (SubmissionEntity, {"submission__corpus": corpus})):
            model.objects.filter(**flt)._raw_delete(model.objects.db)
        Task.objects.filter(corpus=corpus).delete()
        subs.delete()
        corpus.delete()
        Annotator.objects.filter(pk__in=ann, answers__isnull=True).delete()
        Team.objects.filter(pk__in=teams, submissions__isnull=True).delete()


def run(systems: int, instances: int, labels: int, *, draws: int = 150, documents: int = 30, exhaustive: int = 0,
        repeats: int = 3, seed: int = 0, as_json: bool = False, keep: bool = False, verbose: bool = False) -> int:
    with tempfile.TemporaryDirectory(prefix="unpooled-bench-") as tmp:
        work = Path(tmp)
        cfg = {"systems": systems, "instances": instances, "labels": labels, "draws": draws, "documents": documents,
               "exhaustive": exhaustive, "repeats": repeats, "seed": seed, "workdir": str(work), "keep": keep, "verbose": verbose}
        got = run_child("rescore", cfg, work)
        if got is None:
            return 3
    if as_json:
        print(json.dumps(got))
    else:
        b = got["rescore_median_batch"]
        print(f"rescore {got['systems']} submissions x ~{got['instances_per_system']:,} instances "
              f"({got['instances']:,} in all, {got['universe']:,} distinct) on {got['database']}, "
              f"{got['labelled_keys']:,} labelled keys, {got['exhaustive_documents']} exhaustive documents "
              f"(load average {got['loadavg'][0]:.1f} on {got['cpus']} CPUs):\n"
              f"  from scratch (offline_data + core score)   {got['from_scratch_seconds']:.2f} s\n"
              f"  cold re-scoring (builds the cache)         {_line(got['cold'])}\n"
              f"  re-scoring, nothing new                    {_line(got['unchanged'])}\n"
              f"  re-scoring after {got['label_batch']} new labels{' ' * (21 - len(str(got['label_batch'])))}"
              f"{got['rescore_seconds']:.3f} s, median of "
              f"{got['repeats']} (scoring.score {got['rescore_scoring_seconds']:.3f} s; CPU of this process "
              f"{got['rescore_cpu_seconds']:.3f} s)\n"
              f"    median batch: {_line(b)}\n"
              f"  entity scores in a batch ({got['entity_documents']} documents with an entity layer of "
              f"{got['entity_layer_mentions']:,} mentions) {got['entities_seconds']:.3f} s, "
              f"{got['entities_cpu_seconds']:.3f} CPU-s (median)\n"
              f"  after new draws of one system              {_line(got['after_new_draws'])}\n"
              f"  after a new submission                     {_line(got['after_new_submission'])}\n"
              f"  largest difference to from scratch         {got['max_abs_difference']:.2e} "
              f"(entity scores {got['entities_max_abs_difference']:.2e})")
    return 0 if max(got["max_abs_difference"], got["entities_max_abs_difference"]) <= 1e-9 else 4


def _parts(parts: dict) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in parts.items())


def _line(b: dict) -> str:
    return (f"{b['seconds']:.3f} s, CPU {b['cpu_seconds']:.3f} s (scoring.score {b['scoring_seconds']:.3f} s: "
            f"{_parts(b['parts'])}); tables grew {_grown(b['grown_bytes'])}")


def _grown(grown: dict) -> str:
    return ", ".join(f"{t} {n / 1024:+,.0f} KiB" for t, n in sorted(grown.items())) or "0"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        from unpooled.service.config.server import one_blas_thread

        one_blas_thread()  # as the task worker it stands for
        child(json.loads(sys.argv[2]))
