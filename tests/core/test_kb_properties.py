"""Property tests: generated valid KBs round-trip; corruptions never crash and always give a located error."""

from __future__ import annotations

import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unpooled.core.diagnostics import CODES
from unpooled.core.kb import read_jsonl, read_tac, write_jsonl, write_tac

from .kb_strategies import BREAKING, SCHEMA, corrupt_line, worlds

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def parse_tac(world, data: str | bytes):
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return read_tac(io.BytesIO(raw), world.corpus(), SCHEMA, path="gen.kb")


@SETTINGS
@given(worlds())
def test_generated_kbs_are_valid_and_round_trip(world):
    kb, rep = parse_tac(world, world.kb_text)
    if world.n_relation_lines == 0:
        assert kb is None and [d.code for d in rep.errors] == ["UP112"]
        return
    assert rep.ok, [d.format() for d in rep.diagnostics]
    assert rep.n_warnings == 0, [d.format() for d in rep.diagnostics]
    for inst in kb.instances:
        assert SCHEMA.relations[inst.predicate].canonical
    corpus = world.corpus()
    out = io.StringIO()
    write_tac(out, kb.run_id, kb.entities.values(), kb.mentions, kb.instances, lambda d, s, e: corpus.text(d)[s:e])
    kb2, rep2 = parse_tac(world, out.getvalue())
    assert rep2.ok and rep2.n_warnings == 0, [d.format() for d in rep2.diagnostics]
    assert kb2.instance_set() == kb.instance_set()
    assert {n: e.type for n, e in kb2.entities.items()} == {n: e.type for n, e in kb.entities.items()}
    js = io.StringIO()
    write_jsonl(js, kb.entities, kb.instances)
    kb3, rep3 = read_jsonl(io.BytesIO(js.getvalue().encode()), corpus, SCHEMA, path="gen.jsonl")
    assert rep3.ok, [d.format() for d in rep3.diagnostics]
    assert kb3.instance_set() == kb.instance_set()


def _check_located(rep, n_lines: int) -> None:
    for d in rep.diagnostics:
        assert d.code in CODES
        assert d.path == "gen.kb"
        assert 0 <= d.line <= n_lines + 1
        assert d.message
        if d.code not in ("UP100", "UP112"):
            assert d.line >= 1, d.format()


@SETTINGS
@given(worlds(), st.data())
def test_breaking_corruptions_give_an_error_on_that_line(world, data):
    ls = world.kb_text.splitlines()
    i = data.draw(st.integers(1, len(ls) - 1), label="line index")
    how = data.draw(st.sampled_from(BREAKING), label="corruption")
    bad = corrupt_line(ls[i], how)
    parts = [l.encode("utf-8") for l in ls]
    parts[i] = bad if isinstance(bad, bytes) else bad.encode("utf-8")
    kb, rep = parse_tac(world, b"\n".join(parts) + b"\n")
    assert kb is None
    _check_located(rep, len(ls))
    assert any(d.line == i + 1 for d in rep.errors), (how, ls[i], [d.format() for d in rep.diagnostics])


@SETTINGS
@given(worlds(), st.data())
def test_random_corruptions_never_crash(world, data):
    raw = bytearray(world.kb_text.encode("utf-8"))
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        op = data.draw(st.sampled_from(["delete", "insert", "replace", "duplicate_line", "swap_lines"]))
        if not raw:
            break
        pos = data.draw(st.integers(0, len(raw) - 1))
        if op == "delete":
            del raw[pos]
        elif op == "insert":
            raw[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
        elif op == "replace":
            raw[pos] = data.draw(st.integers(0, 255))
        else:
            ls = bytes(raw).split(b"\n")
            j = data.draw(st.integers(0, len(ls) - 1))
            if op == "duplicate_line":
                ls.insert(j, ls[j])
            else:
                k = data.draw(st.integers(0, len(ls) - 1))
                ls[j], ls[k] = ls[k], ls[j]
            raw = bytearray(b"\n".join(ls))
    kb, rep = parse_tac(world, bytes(raw))
    _check_located(rep, bytes(raw).count(b"\n") + 1)
    assert (kb is None) == (rep.n_errors > 0)
