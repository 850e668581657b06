"""``unpooled bench controls``: can an annotator tell a gold control from a real item by the server's timing?

Gold controls measure annotators only while they look like any other item (security review 2026-11-26, N3): an
annotator who could tell one would answer controls carefully and the rest as they please.  The page's contents and
counts are the same for both (``tests/security/test_crowd_integrity.py``); this benchmark measures the remaining
channel, the time the server takes.

In a fresh database (``DATABASE_URL``, default a SQLite file), in one process through Django's test client (no
network: the server's own time, the most an attacker could ever see): the first ``--documents`` Re-DocRED dev
documents (``UNPOOLED_SHARED_DATA``) as a corpus whose DocRED labels are a submission; verification requested for
``--items`` of its instances; ``--controls`` gold controls; ``--annotators`` in-house annotators with a control
share of 0.3.  Each annotator takes the next verification task, views its page ``--reloads`` times (an attacker
may reload a page as often as they like and average) and answers it, until the queue is empty for them.

Reported for the page views (GET) and the answers (POST), controls against items: medians, the difference of
medians, a two-sided Mann-Whitney test, and the accuracy of the best threshold rule that calls a page a control
from its mean time over ``k`` reloads (k = 1, 5, 25: bootstrap means of the page's own reloads), beside what the
same rule scores by chance (the labels shuffled: an in-sample best threshold is above 0.5 on noise alone).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from unpooled.bench import run_child

HOLDS = {"relation": "holds", "subject_ok": True, "object_ok": True, "link_ok": None}
NONE = {"relation": "none", "subject_ok": True, "object_ok": True, "link_ok": None}
RELOADS_TOLD = (1, 5, 25)


def _setup(cfg: dict):
    """The corpus, its submission, the items, the controls and the annotators' signed-in clients."""
    from django.test import Client

    from unpooled.core.corpus import iter_documents
    from unpooled.core.kb.docred import docred_to_jsonl
    from unpooled.demo import find_shared_data
    from unpooled.service.accounts.actions import do_add_user
    from unpooled.service.annotation import actions
    from unpooled.service.annotation.controls import create_verify_controls
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.submissions.actions import do_ingest_submission
    from unpooled.service.submissions.models import RelationInstance

    shared = find_shared_data()
    if shared is None:
        raise SystemExit("bench controls: Re-DocRED not found (set UNPOOLED_SHARED_DATA to the shared data folder)")
    work = Path(cfg["workdir"])
    data = json.loads((shared / "redocred" / "dev_revised.json").read_text())[:cfg["documents"]]
    path = work / "corpus.json"
    path.write_text(json.dumps(data))
    corpus = do_load_corpus(path, "docred", "timing")
    st = actions.settings_for(corpus)
    st.control_share, st.answers_per_item = 0.3, cfg["annotators"]
    st.save()
    kb = work / "run.jsonl"
    with open(kb, "w") as out:
        docred_to_jsonl(iter_documents(path, "docred"), out)
    res = do_ingest_submission(kb, "timing", "TeamA", "a1", "jsonl")
    if not res.ok:
        raise SystemExit(f"bench controls: the submission was refused: {res.report.to_dict()}")
    ids = list(RelationInstance.objects.filter(submission=res.submission).order_by("pk")
               .values_list("pk", flat=True))[:cfg["items"]]
    actions.request_verification(res.submission, ids)
    create_verify_controls(corpus, cfg["controls"], rng=cfg["seed"])
    clients = []
    for a in range(cfg["annotators"]):
        _, password = do_add_user(f"timer{a}", "annotator")
        c = Client(HTTP_HOST="localhost")
        if not c.login(username=f"timer{a}", password=password):
            raise SystemExit("bench controls: could not sign an annotator in")
        clients.append(c)
    return clients


def _walk(client, reloads: int, rng) -> list[dict]:
    """One annotator's pass through the queue: per task, whether it is a control, its page's times and its
    answer's time (seconds)."""
    from django.urls import reverse

    from unpooled.service.annotation.models import Assignment

    out = []
    while True:
        r = client.get(reverse("annotation:next", args=["verify"]))
        if r.status_code != 302:
            return out
        token = r["Location"].rstrip("/").split("/")[-1]
        url = reverse("annotation:task", args=[token])
        gets = []
        for _ in range(reloads):
            t = time.perf_counter()
            page = client.get(url)
            gets.append(time.perf_counter() - t)
            if page.status_code != 200:
                raise SystemExit(f"bench controls: the task page answered {page.status_code}")
        # an honest annotator: right on the controls (a wrong one would soon be blocked), either way on the items
        lease = Assignment.objects.select_related("task").get(token=token)
        right = (lease.task.control_answer or {}).get("correct") if lease.task.is_control else rng.random() < 0.5
        answer = HOLDS if right else NONE
        t = time.perf_counter()
        r = client.post(url, {"answer": json.dumps(answer), "seconds": "7"})
        post = time.perf_counter() - t
        if r.status_code != 302:
            raise SystemExit(f"bench controls: the answer was refused ({r.status_code})")
        out.append({"control": lease.task.is_control, "get": gets, "post": post})


def _told(controls: list[list[float]], items: list[list[float]], k: int, rng) -> float:
    """Balanced accuracy of the best threshold on the mean of ``k`` reloads (drawn with replacement from each page's
    own), calling the slower or the faster side a control, whichever is better (in-sample: an upper bound)."""
    import numpy as np

    def means(pages):
        return np.array([rng.choice(p, size=k).mean() for p in pages])

    c, i = means(controls), means(items)
    best = 0.5
    for thr in np.concatenate([c, i]):
        hi = 0.5 * ((c >= thr).mean() + (i < thr).mean())
        best = max(best, hi, 1 - hi)
    return float(best)


def _chance(controls, items, k: int, rng, permutations: int = 20) -> float:
    """What :func:`_told` scores on the same pages with the labels shuffled (its in-sample best threshold is above
    0.5 by chance alone): the mean over ``permutations`` shuffles."""
    pages = controls + items
    got = []
    for _ in range(permutations):
        order = rng.permutation(len(pages))
        got.append(_told([pages[j] for j in order[:len(controls)]], [pages[j] for j in order[len(controls):]], k, rng))
    return float(sum(got) / len(got))


def child(cfg: dict) -> None:
    from unpooled.service.config.bootstrap import setup_django

    setup_django(migrate=True)
    import numpy as np
    from scipy.stats import mannwhitneyu

    clients = _setup(cfg)
    rng = np.random.default_rng(cfg["seed"])
    rows = []
    for c in clients:
        rows += _walk(c, cfg["reloads"], rng)
    ctl = [r for r in rows if r["control"]]
    item = [r for r in rows if not r["control"]]
    if not ctl or not item:
        raise SystemExit(f"bench controls: {len(ctl)} controls and {len(item)} items answered: nothing to compare")
    out = {"controls": len(ctl), "items": len(item), "reloads": cfg["reloads"]}
    for what, pick in (("get", lambda r: r["get"][1:] or r["get"]), ("post", lambda r: [r["post"]])):
        a = [x * 1e3 for r in ctl for x in pick(r)]
        b = [x * 1e3 for r in item for x in pick(r)]
        out[what] = {"control_median_ms": statistics.median(a), "item_median_ms": statistics.median(b),
                     "difference_ms": statistics.median(a) - statistics.median(b),
                     "mann_whitney_p": float(mannwhitneyu(a, b, alternative="two-sided").pvalue)}
    # the first view of a page builds what later views reuse; an attacker reloads: the later views
    pages_c = [r["get"][1:] or r["get"] for r in ctl]
    pages_i = [r["get"][1:] or r["get"] for r in item]
    posts_c, posts_i = [[r["post"]] for r in ctl], [[r["post"]] for r in item]
    out["get"]["told_apart"] = {str(k): _told(pages_c, pages_i, k, rng) for k in RELOADS_TOLD}
    out["post"]["told_apart"] = {"1": _told(posts_c, posts_i, 1, rng)}
    out["get"]["chance"] = {str(k): _chance(pages_c, pages_i, k, rng) for k in RELOADS_TOLD}
    out["post"]["chance"] = {"1": _chance(posts_c, posts_i, 1, rng)}
    print(json.dumps(out))


def run(*, documents: int = 10, items: int = 150, controls: int = 60, annotators: int = 6, reloads: int = 6,
        seed: int = 0, as_json: bool = False) -> int:
    with tempfile.TemporaryDirectory(prefix="unpooled-bench-") as tmp:
        cfg = {"documents": documents, "items": items, "controls": controls, "annotators": annotators,
               "reloads": reloads, "seed": seed, "workdir": tmp}
        got = run_child("controls", cfg, Path(tmp))
    if got is None:
        return 3
    if as_json:
        print(json.dumps(got))
        return 0
    print(f"{got['controls']} control and {got['items']} item pages answered, each viewed {got['reloads']} times "
          "(in-process: the server's own time)")
    print(f"{'':6} {'control ms':>11} {'item ms':>9} {'diff ms':>8} {'Mann-Whitney p':>15}  told apart (balanced "
          "accuracy; 0.5 = chance)")
    for what in ("get", "post"):
        g = got[what]
        told = ", ".join(f"{k} view{'s' if k != '1' else ''}: {v:.2f} (chance {g['chance'][k]:.2f})"
                         for k, v in g["told_apart"].items())
        print(f"{what.upper():6} {g['control_median_ms']:11.2f} {g['item_median_ms']:9.2f} {g['difference_ms']:8.2f} "
              f"{g['mann_whitney_p']:15.3g}  {told}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
