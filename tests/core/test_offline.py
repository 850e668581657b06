"""Offline scoring from files: a hand-computed example, the joint estimator against a direct call, located errors."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

from unpooled.core.errors import InvalidInputError, LocatedError
from unpooled.core.estimators import estimate, make_design
from unpooled.core.offline import InputFindings, load, score, score_files

pytestmark = pytest.mark.filterwarnings("ignore::unpooled.core.estimators.WeightDegeneracyWarning")


def inst(doc, s, p, o, *, entities=None, value=None):
    """An instance as JSON fields; ``entities`` = (subject id, object id) for submissions."""
    subj = {"start": s[0], "end": s[1]}
    obj = {"start": o[0], "end": o[1]} if o else {}
    if value is not None:
        obj["value"] = value
    if entities:
        subj["entity"] = entities[0]
        if value is None:
            obj["entity"] = entities[1]
    return {"doc": doc, "subject": subj, "predicate": p, "object": obj}


# the universe: x1, x2, x3 (string value) submitted by A; x2, x4 by B
X1 = ("D1", (0, 5), "p", (10, 15))
X2 = ("D1", (0, 5), "p", (20, 25))
X3 = ("D1", (30, 35), "q", (36, 43))
X4 = ("D2", (0, 3), "p", (5, 9))
Y5 = ("D1", (40, 45), "p", (50, 55))  # true, found by nobody


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


@pytest.fixture
def files(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    write_jsonl(subs / "A.jsonl", [
        inst(*X1, entities=("a1", "a2")), inst(*X2, entities=("a1", "a3")),
        inst(*X3, entities=("a4", None), value="Senator"),
    ])
    write_jsonl(subs / "B.jsonl", [inst(*X2, entities=("b1", "b2")), inst(*X4, entities=("b3", "b4"))])
    (subs / "notes.txt").write_text("not a submission")
    labels = write_jsonl(tmp_path / "L.jsonl", [
        {"system": "A", **inst(*X1), "label": 1},
        {"system": "A", **inst(*X2), "label": 0},
        {"system": "A", "key": "D1\t30-35\tq\t=senator", "label": 1},
        {"system": "A", **inst(*X1), "label": 1},  # a repeated draw
        "",
        {"system": "B", **inst(*X2), "label": 0},
        {"system": "B", **inst(*X4), "label": 1},
    ])
    exhaustive = write_jsonl(tmp_path / "E.jsonl", [
        inst(*X1), inst(X3[0], X3[1], X3[2], None, value="SENATOR "), inst(*Y5), inst(*X4),
    ])
    return labels, subs, exhaustive


def test_simple_estimator_by_hand(files):
    res = score_files(*files, estimator="simple")
    assert res.systems == ("A", "B")
    a, b = res.rows
    # precision: A drew x1 (1), x2 (0), x3 (1), x1 (1); B drew x2 (0), x4 (1)
    assert a.p == pytest.approx(3 / 4) and b.p == pytest.approx(1 / 2)
    # recall over the 4 exhaustive true instances: A found x1 and x3 (value compared normalised), B found x4
    assert a.r == pytest.approx(2 / 4) and b.r == pytest.approx(1 / 4)
    assert a.f1 == pytest.approx(2 * 0.75 * 0.5 / 1.25) and b.f1 == pytest.approx(1 / 3)
    assert (a.labels, b.labels) == (4, 2) and a.estimator == "simple"
    for r in res.rows:
        assert r.p_lo <= r.p <= r.p_hi and r.r_lo <= r.r <= r.r_hi and r.f1_lo <= r.f1 <= r.f1_hi
    assert set(a.to_dict()) == {"system", "p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi",
                                "labels", "estimator"}


def test_joint_matches_a_direct_estimate_call(files):
    res = score_files(*files, estimator="joint", weights="heuristic", bootstrap=50, rng=3)
    # the same design by hand: universe x1, x2, x3, x4 in order of first submission
    P = np.array([[1 / 3, 1 / 3, 1 / 3, 0], [0, 1 / 2, 0, 1 / 2]])
    src, xs, f = [0, 0, 0, 0, 1, 1], [0, 1, 2, 0, 1, 3], [1, 0, 1, 1, 0, 1]
    g0 = np.array([[1, 1, 0, 0], [0, 0, 0, 1]], bool)
    d = make_design(P, src, xs, f, g0)
    assert (res.design.P.toarray() == pytest.approx(P)) and (res.design.g0 == g0).all()
    direct = estimate(d, estimator="joint", weights="heuristic", bootstrap=50, rng=3)
    for i, row in enumerate(res.rows):
        want = direct.row(i)
        for k in ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi"):
            assert getattr(row, k) == pytest.approx(want[k])
        assert row.boot["r"] == pytest.approx((want["r_boot_lo"], want["r_boot_hi"]))
        assert row.estimator == "joint-heuristic"
        assert {"p_boot_lo", "r_boot_hi", "f1_boot_lo"} <= set(row.to_dict())


def test_levels_use_each_systems_own_entity_ids(files):
    data = load(*files)
    res = score(data, level="entity", estimator="simple")
    # A: subject a1 has x1, x2; a4 has x3 -> p = 1/4, 1/4, 1/2.  B: two subjects -> 1/2 each
    assert res.design.P.toarray() == pytest.approx(np.array([[1 / 4, 1 / 4, 1 / 2, 0], [0, 1 / 2, 0, 1 / 2]]))
    res = score(data, level="relation", estimator="simple")
    # A: predicates p (x1, x2) and q (x3)
    assert res.design.P.toarray()[0] == pytest.approx([1 / 4, 1 / 4, 1 / 2, 0])
    for level in ("subj-rel", "fill"):
        P = score(data, level=level, estimator="simple").design.P
        assert np.asarray(P.sum(axis=1)).ravel() == pytest.approx([1, 1])


def test_inclusion_and_weight_enter_recall(files, tmp_path):
    labels, subs, _ = files
    ex = write_jsonl(tmp_path / "E2.jsonl", [
        {**inst(*X1), "weight": 1}, inst(X3[0], X3[1], X3[2], None, value="senator"),
        {**inst(*Y5), "inclusion": 0.5}, {"key": "D2\t0-3\tp\t5-9", "weight": 3.0},
    ])
    res = score_files(labels, subs, ex, estimator="simple")
    # weights v = weight / inclusion = 1, 1, 2, 3: A found 1 + 1 of 7, B found 3 of 7
    assert res.rows[0].r == pytest.approx(2 / 7) and res.rows[1].r == pytest.approx(3 / 7)
    joint = score_files(labels, subs, ex, estimator="joint")
    assert any("p0 weights" in w for w in joint.warnings)


def test_overlap_matching(files):
    labels, subs, ex = files
    with (subs / "B.jsonl").open("a") as fh:  # an instance overlapping the unfound y5
        fh.write(json.dumps(inst("D1", (41, 44), "p", (52, 60), entities=("b5", "b6"))) + "\n")
    assert score_files(labels, subs, ex, estimator="simple").rows[1].r == pytest.approx(1 / 4)
    res = score_files(labels, subs, ex, estimator="simple", match="overlap")
    assert res.rows[1].r == pytest.approx(2 / 4) and res.rows[1].p == pytest.approx(1 / 2)
    # joint with overlap: draws matched by the same policy, each fact counted once
    joint = score_files(labels, subs, ex, estimator="joint", match="overlap")
    assert 0 <= joint.rows[1].r <= 1 and joint.rows[1].p == pytest.approx(res.rows[1].p, abs=0.5)


def test_system_without_own_draws_is_a_warning(files):
    labels, subs, ex = files
    write_jsonl(subs / "C.jsonl", [inst(*X4, entities=("c1", "c2"))])
    res = score_files(labels, subs, ex, estimator="joint")
    c = res.rows[2]
    assert c.system == "C" and c.labels == 0 and "no labelled draws of its own" in c.warnings[0]
    assert c.p == pytest.approx(1.0) and 0 < c.r < 1  # estimated through B's draw of x4 (its only instance)
    simple = score_files(labels, subs, ex, estimator="simple").rows[2]
    assert math.isnan(simple.p) and simple.to_dict()["p"] is None and simple.to_dict()["f1"] is None
    assert simple.r == pytest.approx(1 / 4)


def test_gzip_and_duplicates(files):
    labels, subs, ex = files
    raw = (subs / "B.jsonl").read_text()
    (subs / "B.jsonl").unlink()
    with gzip.open(subs / "B.jsonl.gz", "wt") as fh:
        fh.write(raw + raw.splitlines()[0] + "\n")  # line 3 repeats line 1
    data = load(labels, subs, ex)
    assert data.ok and [s.name for s in data.submissions] == ["A", "B"] and len(data.submissions[1].keys) == 2
    rep = data.reports[1]
    assert [(d.line, d.code) for d in rep.warnings] == [(3, "UP209")]
    assert score(data, estimator="simple").rows[1].p == pytest.approx(1 / 2)


def _errors(exc_info) -> list[tuple[str, int, str, str]]:
    return [(Path(d.path).name, d.line, d.code, d.field) for r in exc_info.value.reports for d in r.errors]


def test_label_errors_are_located(files):
    labels, subs, ex = files
    lines = labels.read_text().splitlines()
    lines += [
        json.dumps({"system": "Z", **inst(*X1), "label": 1}),                  # 8: unknown system
        json.dumps({"system": "B", **inst(*X1), "label": 1}),                  # 9: B did not submit x1
        json.dumps({"system": "A", **inst(*Y5), "label": 1}),                  # 10: nobody submitted y5
        json.dumps({"system": "A", **inst(*X1), "label": 1.5}),                # 11: not a probability
        json.dumps({"system": "A", **inst(*X1), "label": True}),               # 12: not a number
        '{"system": "A", ',                                                    # 13: invalid JSON
        json.dumps({"system": "A", "key": "D1 0-5 p", "label": 1}),            # 14: malformed key
        json.dumps({"system": "A", "key": "D1\t0-5\tp\t10-15", "doc": "D1", "label": 1}),  # 15: both
        json.dumps({"system": "A", **inst("D1", (5, 5), "p", (10, 15)), "label": 1}),     # 16: empty span
        json.dumps({**inst(*X1), "label": 1}),                                 # 17: no system
    ]
    labels.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputFindings) as exc:
        score_files(labels, subs, ex)
    assert _errors(exc) == [
        ("L.jsonl", 8, "UP230", "system"), ("L.jsonl", 9, "UP231", "system"), ("L.jsonl", 10, "UP231", "system"),
        ("L.jsonl", 11, "UP107", "label"), ("L.jsonl", 12, "UP107", "label"), ("L.jsonl", 13, "UP106", ""),
        ("L.jsonl", 14, "UP107", "key"), ("L.jsonl", 15, "UP107", "key"), ("L.jsonl", 16, "UP108", "subject"),
        ("L.jsonl", 17, "UP107", "system"),
    ]
    msgs = {d.line: d.message for r in exc.value.reports for d in r.errors}
    assert "p_B cannot have drawn it (other systems submitted it" in msgs[9]
    assert "it is in no submission" in msgs[10]
    assert str(exc.value).startswith("10 error(s) in the input files; first: ") and "L.jsonl:8:1: UP230" in str(
        exc.value)


def test_submission_and_exhaustive_errors_are_located(files):
    labels, subs, ex = files
    with (subs / "A.jsonl").open("a") as fh:
        fh.write(json.dumps(inst(*X4)) + "\n")                                  # 4: no entity ids
        fh.write(json.dumps(inst("D1", (9, 3), "p", (1, 2), entities=("a", "b"))) + "\n")  # 5: bad span
        fh.write(json.dumps({**inst(*X4, entities=("a", "b")), "predicate": 7}) + "\n")  # 6: bad predicate
    with ex.open("a") as fh:
        fh.write(json.dumps({**inst(*X4), "inclusion": 0}) + "\n")              # 5
        fh.write(json.dumps({**inst(*X4), "weight": -1}) + "\n")                # 6
        fh.write(json.dumps(inst(*X4)) + "\n")                                  # 7: duplicate: a warning
    data = load(labels, subs, ex)
    assert not data.ok
    with pytest.raises(InputFindings) as exc:
        score(data)
    assert _errors(exc) == [
        ("A.jsonl", 4, "UP107", "subject.entity"), ("A.jsonl", 5, "UP108", "subject"),
        ("A.jsonl", 6, "UP107", "predicate"),
        ("E.jsonl", 5, "UP107", "inclusion"), ("E.jsonl", 6, "UP107", "weight"),
    ]
    assert [(d.line, d.code) for d in data.reports[-1].warnings] == [(7, "UP209")]
    # A's file is broken, so its draws are not checked against it (no cascade of UP231)
    assert data.reports[2].ok


def test_file_level_problems(files, tmp_path):
    labels, subs, ex = files
    with pytest.raises(LocatedError, match="not a folder"):
        load(labels, tmp_path / "nope", ex)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LocatedError, match="no submissions found"):
        load(labels, empty, ex)
    with pytest.raises(LocatedError, match="no such file"):
        load(tmp_path / "missing.jsonl", subs, ex)
    (subs / "A.jsonl.gz").write_bytes(gzip.compress((subs / "A.jsonl").read_bytes()))
    with pytest.raises(LocatedError, match="system name 'A' is also given by"):
        load(labels, subs, ex)
    (subs / "A.jsonl.gz").unlink()
    (subs / "B.jsonl").write_text("\n")
    data = load(labels, subs, ex)
    assert [(d.line, d.code) for d in data.reports[1].errors] == [(0, "UP112")]


def test_invalid_options(files):
    data = load(*files)
    for kw, msg in ((dict(level="doc"), "level: expected one of"), (dict(estimator="x"), "estimator: expected"),
                    (dict(weights="x"), "weights: expected"), (dict(match="cluster", estimator="simple"),
                                                               "match: expected one of exact, overlap"),
                    (dict(bootstrap=-1), "bootstrap"), (dict(confidence=1.0), "confidence")):
        with pytest.raises(InvalidInputError, match=msg):
            score(data, **kw)
