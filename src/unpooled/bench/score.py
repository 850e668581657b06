"""``unpooled bench score``: joint estimation with bootstrap intervals at service scale, on one core.

A synthetic design: ``--systems`` systems over a 30,000-instance universe with
overlapping outputs (shared team components), ``--labels`` labelled draws per
system, ``--exhaustive`` exhaustively found true instances, ``--replicates``
bootstrap replicates. The timed call is :func:`unpooled.core.estimators.estimate`
(point estimates, analytic and bootstrap intervals for P, R and F1 of every
system). It runs in a child process with every BLAS pool limited to one thread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def synthetic_design(m: int, labels: int, exhaustive: int, *, seed: int = 0, universe: int = 30_000):
    import numpy as np

    from unpooled.core.estimators import distribution_matrix, make_design

    rng = np.random.default_rng(seed)
    truth = rng.random(universe) < 0.4
    teams = [np.sort(rng.choice(universe, size=3000, replace=False)) for _ in range(max(1, m // 5))]
    systems = []
    for i in range(m):
        base = teams[i % len(teams)]
        own = rng.choice(universe, size=300, replace=False)
        systems.append(np.unique(np.concatenate([base[rng.random(len(base)) < 0.8], own])))
    P = distribution_matrix(systems, universe)
    src = np.repeat(np.arange(m), labels)
    xs = np.concatenate([s[rng.integers(0, len(s), labels)] for s in systems])
    y0 = rng.choice(np.flatnonzero(truth), exhaustive)
    member = np.zeros((m, universe), bool)
    for j, s in enumerate(systems):
        member[j, s] = True
    return make_design(P, src, xs, truth[xs].astype(float), member[:, y0])


def child(m: int, labels: int, exhaustive: int, replicates: int, weights: str) -> None:
    from unpooled.core.estimators import estimate

    d = synthetic_design(m, labels, exhaustive)
    estimate(d, weights=weights, bootstrap=10, rng=0)  # warm-up (imports, allocator)
    t0 = time.perf_counter()
    estimate(d, weights=weights, bootstrap=replicates, rng=1)
    print(json.dumps({"systems": m, "replicates": replicates, "seconds": round(time.perf_counter() - t0, 3),
                      "labels": m * labels, "exhaustive": exhaustive, "weights": weights}))


def run(m: int, labels: int, exhaustive: int, replicates: int, weights: str, *, as_json: bool) -> int:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-m", "unpooled.bench.score", "--child", str(m), str(labels),
                          str(exhaustive), str(replicates), weights], env=env, check=True, capture_output=True,
                         text=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if as_json:
        print(json.dumps({"systems": got["systems"], "replicates": got["replicates"], "seconds": got["seconds"]}))
    else:
        print(f"score {got['systems']} systems x {labels} labels + {exhaustive} exhaustive, "
              f"{got['replicates']} bootstrap replicates, joint-{weights}: {got['seconds']:.2f} s on one core")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
