"""``unpooled simulate protocols`` (core.simulate.protocols): each recall protocol estimates its own truth, and
a within-sentence number is no document-level recall for a system weak across sentences."""

from __future__ import annotations

import json

import numpy as np
import pytest

from unpooled.core.simulate import protocols


def test_world_and_truths():
    w = protocols.make_world(np.random.default_rng(1), n_documents=60)
    assert 0 < len(w.within) < len(w.facts)
    t = protocols.truths(w)
    # strong within sentences, weak across: its document-level recall is well below its within-sentence one
    assert t[("document", "sentence-strong")] < t[("sentence", "sentence-strong")] - 0.2
    # the document protocol's exhaustive sample holds every fact of the documents, cross-sentence ones too
    docs = sorted(w.mentions)[:10]
    ex = protocols.exhaustive(w, docs, "document")
    assert len(ex) == sum(1 for f in w.facts if f[0] in docs)


def test_each_protocol_covers_its_own_truth():
    rows = {(r.protocol, r.system): r for r in protocols.run(25, seed=3, n_documents=120, documents=30, draws=200)}
    for r in rows.values():
        assert abs(r.mean - r.truth) < 4 * r.bias_se + 0.01, r
        assert r.coverage >= 0.72, r  # 90% intervals over 25 trials (a binomial lower tail)
    doc, sent = rows[("document", "sentence-strong")], rows[("sentence", "sentence-strong")]
    assert doc.covers_document >= 0.72 and sent.covers_document == 0.0


def test_cli(capsys):
    from unpooled.cli.main import main

    assert main(["simulate", "protocols", "--trials", "3", "--documents", "10", "--draws", "50", "--json", "-"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert {(r["protocol"], r["system"]) for r in got["rows"]} == {(p, s) for p in ("sentence", "document")
                                                                  for s in protocols.SYSTEMS}
    with pytest.raises(SystemExit) as exc:  # a usage error (cli.main.integer)
        main(["simulate", "protocols", "--documents", "1"])
    assert exc.value.code == 2 and "argument --documents: expected an integer from 2 to 300" in capsys.readouterr().err
