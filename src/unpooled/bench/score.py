"""``unpooled bench score``: joint estimation with bootstrap intervals at service scale, on one core.

A synthetic design: ``--systems`` systems over a 30,000-instance universe with
overlapping outputs (shared team components), ``--labels`` labelled draws per
system, ``--exhaustive`` exhaustively found true instances, ``--replicates``
bootstrap replicates. The timed call is :func:`unpooled.core.estimators.estimate`
(point estimates, analytic and bootstrap intervals for P, R and F1 of every
system): its elapsed time and its CPU time (the two differ on a shared machine). It runs in a child process with
every BLAS pool limited to one thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def synthetic_design(m: int, labels: int, exhaustive: int, *, seed: int = 0, universe: int | None = None,
                     instances: int = 3000):
    """``m`` systems of about ``instances`` instances each (80% of a team's shared base, plus 10% of their own)
    over a universe of ``max(30,000, 10 x instances)``; ``labels`` labelled draws per system."""
    import numpy as np

    from unpooled.core.estimators import distribution_matrix, make_design

    universe = universe or max(30_000, 10 * instances)
    rng = np.random.default_rng(seed)
    truth = rng.random(universe) < 0.4
    teams = [np.sort(rng.choice(universe, size=min(instances, universe), replace=False))
             for _ in range(max(1, m // 5))]
    systems = []
    for i in range(m):
        base = teams[i % len(teams)]
        own = rng.choice(universe, size=max(1, instances // 10), replace=False)
        systems.append(np.unique(np.concatenate([base[rng.random(len(base)) < 0.8], own])))
    P = distribution_matrix(systems, universe)
    src = np.repeat(np.arange(m), labels)
    xs = np.concatenate([s[rng.integers(0, len(s), labels)] for s in systems])
    y0 = rng.choice(np.flatnonzero(truth), exhaustive)
    y0 = np.sort(y0)
    member = np.zeros((m, len(y0)), bool)
    for j, s in enumerate(systems):
        member[j] = np.isin(y0, s)
    return make_design(P, src, xs, truth[xs].astype(float), member), truth


def synthetic_votes(d, truth, *, accuracy: float = 0.8, workers: int = 20, replicates: int = 30, seed: int = 0):
    """Three answers from a crowd of ``accuracy`` for every labelled instance, with the crowd's confusions and
    replicates of them (the service's input to the estimator)."""
    import numpy as np

    from unpooled.core.estimators.noisy import crowd_votes

    rng = np.random.default_rng(seed)
    lab = np.unique(d.xs)
    who = np.argsort(rng.random((len(lab), workers)), axis=1)[:, :3].ravel()
    it = np.repeat(lab, 3)
    yes = np.where(rng.random(len(it)) < accuracy, truth[it], ~truth[it])
    sens = np.full(workers, accuracy)
    return crowd_votes(it, who, yes, sens, 1 - sens, np.clip(sens + rng.normal(0, 0.02, (replicates, workers)), .01, .99),
                       np.clip(1 - sens + rng.normal(0, 0.02, (replicates, workers)), .01, .99), n_items=d.P.shape[1])


def child(m: int, labels: int, exhaustive: int, replicates: int, weights: str, instances: int, votes: bool) -> None:
    import resource

    from unpooled.core.estimators import estimate

    d, truth = synthetic_design(m, labels, exhaustive, instances=instances)
    v = synthetic_votes(d, truth) if votes else None
    boot = 0 if votes else replicates
    estimate(d, weights=weights, bootstrap=min(boot, 10), rng=0, votes=v)  # warm-up (imports, allocator)
    t0, c0 = time.perf_counter(), time.process_time()
    estimate(d, weights=weights, bootstrap=boot, rng=1, votes=v)
    print(json.dumps({"systems": m, "replicates": boot, "seconds": round(time.perf_counter() - t0, 3),
                      "cpu_seconds": round(time.process_time() - c0, 3),
                      "labels": m * labels, "exhaustive": exhaustive, "weights": weights, "instances": instances,
                      "votes": votes, "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


def run(m: int, labels: int, exhaustive: int, replicates: int, weights: str, *, as_json: bool,
        instances: int = 3000, votes: bool = False) -> int:
    from unpooled.service.config.server import ONE_BLAS_THREAD

    env = dict(os.environ, **ONE_BLAS_THREAD)
    out = subprocess.run([sys.executable, "-m", "unpooled.bench.score", "--child", str(m), str(labels),
                          str(exhaustive), str(replicates), weights, str(instances), str(int(votes))], env=env,
                         check=True, capture_output=True, text=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if as_json:
        print(json.dumps({k: got[k] for k in ("systems", "replicates", "seconds", "cpu_seconds", "instances", "votes",
                                              "peak_rss_mb")}))
    else:
        how = ("from crowd votes (3 answers per labelled instance, confusion replicates; no bootstrap)" if votes
               else f"{got['replicates']} bootstrap replicates")
        print(f"score {got['systems']} systems of ~{instances:,} instances x {labels} labels + {exhaustive} "
              f"exhaustive, {how}, joint-{weights}: {got['seconds']:.2f} s on one core "
              f"({got['cpu_seconds']:.2f} CPU-s: the difference is time the machine gave to others), "
              f"peak memory {got['peak_rss_mb']:,} MB")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 9 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], int(sys.argv[7]),
              bool(int(sys.argv[8])))
