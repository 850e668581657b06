"""``unpooled bench documents``: the document-sample analysis (organiser page, ``corpus analyse``) on Re-DocRED.

Loads Re-DocRED dev + test (1,000 documents; ``--copies K`` repeats them K times under new ids, for a
larger corpus) into the database named by ``DATABASE_URL`` (a fresh SQLite file by default), then
times, in one process: reading the corpus into the core's inputs
(:func:`unpooled.service.organiser.documents.corpus_inputs`), the analysis of each scheme
(``--draws`` samples of ``--size`` documents), the SVG figures, and the organiser page's request with
an empty cache and with the cached result.  Wall time; the load average is printed beside.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from unpooled.bench import run_child


def child(cfg: dict) -> None:
    from unpooled.service.config.bootstrap import setup_django

    setup_django(migrate=True)
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.test import Client

    from unpooled.core.sampling.analysis import SCHEMES, analyse_schemes, figures_svg
    from unpooled.service.accounts.models import Profile, Role
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.organiser import documents

    work = Path(cfg["workdir"])
    data = []
    for part in ("dev_revised.json", "test_revised.json"):
        data += json.loads((Path(cfg["data"]) / "redocred" / part).read_text())
    docs = []
    for k in range(cfg["copies"]):
        for d in data:
            docs.append(dict(d, title=f"{d['title']} (copy {k})" if k else d["title"]))
    path = work / "redocred.json"
    path.write_text(json.dumps(docs))
    t = time.perf_counter()
    corpus = do_load_corpus(path, "docred", "bench-documents")
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    inp = documents.corpus_inputs(corpus)
    read_s = time.perf_counter() - t
    per_scheme = {}
    for s in SCHEMES:
        t = time.perf_counter()
        c, an = analyse_schemes(inp["texts"], inp["names"], inp["relations"], schemes=[s], size=cfg["size"],
                                draws=cfg["draws"], rng=0)
        per_scheme[s] = round(time.perf_counter() - t, 3)
    t, c0 = time.perf_counter(), time.process_time()
    c, an = analyse_schemes(inp["texts"], inp["names"], inp["relations"], size=cfg["size"], draws=cfg["draws"], rng=0)
    figures_svg(c, an)
    all_s, all_cpu = time.perf_counter() - t, time.process_time() - c0
    u = User.objects.create_user("bench-org", password="pw-bench-org-1")
    Profile.objects.create(user=u, role=Role.ORGANISER)
    client = Client(HTTP_HOST=(settings.ALLOWED_HOSTS or ["localhost"])[0].lstrip(".").replace("*", "localhost"))
    client.force_login(u)
    cache.clear()
    documents.INLINE_DOCUMENTS = max(documents.INLINE_DOCUMENTS, corpus.n_documents)   # time the inline path
    q = {"corpus": corpus.name, "size": cfg["size"], "draws": cfg["draws"]}
    t, c0 = time.perf_counter(), time.process_time()
    r = client.get("/organiser/documents/", q)
    cold_s, cold_cpu = time.perf_counter() - t, time.process_time() - c0
    t = time.perf_counter()
    r2 = client.get("/organiser/documents/", q)
    warm_s = time.perf_counter() - t
    print(json.dumps({
        "documents": corpus.n_documents, "entities": len(c.df), "size": cfg["size"], "draws": cfg["draws"],
        "load_seconds": round(load_s, 2), "read_seconds": round(read_s, 3), "scheme_seconds": per_scheme,
        "analysis_seconds": round(all_s, 3), "analysis_cpu_seconds": round(all_cpu, 3),
        "page_cold_seconds": round(cold_s, 3), "page_cold_cpu_seconds": round(cold_cpu, 3),
        "page_cached_seconds": round(warm_s, 3), "status": [r.status_code, r2.status_code],
        "loadavg": list(os.getloadavg()), "cpus": os.cpu_count(),
    }))


def run(*, copies: int = 1, size: int = 100, draws: int = 3, as_json: bool = False) -> int:
    from unpooled.demo import find_shared_data

    data = find_shared_data()
    if data is None:
        print("bench documents: Re-DocRED not found (../shared/data/redocred, or UNPOOLED_SHARED_DATA)", file=sys.stderr)
        return 3
    with tempfile.TemporaryDirectory(prefix="unpooled-bench-") as tmp:
        cfg = {"copies": copies, "size": size, "draws": draws, "workdir": tmp, "data": str(data)}
        got = run_child("documents", cfg, Path(tmp))
        if got is None:
            return 3
    if as_json:
        print(json.dumps(got))
        return 0
    per = ", ".join(f"{k} {v:.2f} s" for k, v in got["scheme_seconds"].items())
    print(f"document-sample analysis of Re-DocRED x{copies}: {got['documents']:,} documents, {got['entities']:,} "
          f"entities, {got['draws']} draws of {got['size']} documents per scheme (load average "
          f"{got['loadavg'][0]:.1f} on {got['cpus']} CPUs)\n"
          f"  load the corpus                 {got['load_seconds']:.1f} s\n"
          f"  read it into the core's inputs  {got['read_seconds']:.2f} s\n"
          f"  per scheme                      {per}\n"
          f"  all four schemes + SVG          {got['analysis_seconds']:.2f} s (CPU {got['analysis_cpu_seconds']:.2f} s)\n"
          f"  organiser page, empty cache     {got['page_cold_seconds']:.2f} s (CPU {got['page_cold_cpu_seconds']:.2f} s; "
          f"status {got['status'][0]})\n"
          f"  organiser page, cached          {got['page_cached_seconds']:.3f} s (status {got['status'][1]})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
