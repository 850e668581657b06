"""TAC Cold Start KBs: the fixture covering every line type, each validation error, round trips."""

from __future__ import annotations

import gzip
import io

import pytest

from unpooled.core.corpus import iter_documents
from unpooled.core.diagnostics import CODES
from unpooled.core.kb import InMemoryCorpus, read_jsonl, read_tac, write_jsonl, write_tac
from unpooled.core.kb.lines import Limits
from unpooled.core.schema import builtin_schema

from ..conftest import FIXTURES

KB_PATH = FIXTURES / "kb" / "coldstart.kb"
D1 = "NYT_ENG_20130914.0094"
D2 = "bolt-eng-DF-170-181103-15978"


@pytest.fixture(scope="module")
def corpus():
    return InMemoryCorpus(iter_documents(FIXTURES / "kb" / "sources.xml", "tac"))


@pytest.fixture(scope="module")
def schema():
    return builtin_schema("tac-kbp")


def lines() -> list[str]:
    return KB_PATH.read_text(encoding="utf-8").splitlines()


def parse(corpus, schema, text: str | bytes, **kw):
    data = text.encode("utf-8") if isinstance(text, str) else text
    return read_tac(io.BytesIO(data), corpus, schema, path="kb.tac", **kw)


def span_of(corpus, doc: str, s: str, nth: int = 0) -> tuple[int, int]:
    text = corpus.text(doc)
    pos = -1
    for _ in range(nth + 1):
        pos = text.index(s, pos + 1)
    return pos, pos + len(s)


def test_fixture_covers_every_line_type():
    kinds = {line.split("\t")[1] for line in lines()[1:]}
    assert {"type", "link", "mention", "canonical_mention", "nominal_mention", "pronominal_mention"} <= kinds
    assert any(line.count("\t") == 4 for line in lines()), "a line with a confidence column"
    assert any('"' in line.split("\t")[2] and line.split("\t")[1].startswith("per:") for line in lines()[1:])


def test_fixture_parses_clean(corpus, schema):
    kb, rep = read_tac(KB_PATH, corpus, schema)
    assert rep.ok, [d.format() for d in rep.diagnostics]
    assert rep.n_warnings == 0, [d.format() for d in rep.diagnostics]
    assert kb.run_id == "fixture_run_1"
    assert rep.counts["entities"] == 7
    # 11 relation lines; the gpe:births_in_city line and the reversed per:spouse line
    # restate instances already present, so 9 canonical instances remain
    assert rep.counts["instances"] == 9
    assert rep.counts["inverses_merged"] == 2
    assert rep.counts["string_instances"] == 3
    assert rep.counts["duplicates_dropped"] == 0
    assert kb.entities[":Carrie_Fisher"].links == ["WIKI:Carrie_Fisher"]
    assert kb.entities[":Lucasfilm"].type == "ORG"


def test_every_instance_is_canonical_and_in_its_justification(corpus, schema):
    kb, _ = read_tac(KB_PATH, corpus, schema)
    for inst in kb.instances:
        rel = schema.relations[inst.predicate]
        assert rel.canonical, inst.predicate
        assert any(b <= inst.subject_start and inst.subject_end <= e for b, e in inst.provenance)
        if inst.value is None:
            assert any(b <= inst.object_start and inst.object_end <= e for b, e in inst.provenance)
    keys = [i.key for i in kb.instances]
    assert len(keys) == len(set(keys))


def test_inverse_and_canonical_forms_share_one_instance(corpus, schema):
    kb, _ = read_tac(KB_PATH, corpus, schema)
    carrie = span_of(corpus, D1, "Carrie Fisher")
    bh = span_of(corpus, D1, "Beverly Hills")
    births = [i for i in kb.instances if {i.subject, i.object} == {":Carrie_Fisher", ":Beverly_Hills"}]
    assert len(births) == 1
    canonical, _ = schema.canonical_of("per:city_of_birth")
    assert births[0].predicate == canonical
    spans = {(births[0].subject_start, births[0].subject_end), (births[0].object_start, births[0].object_end)}
    assert spans == {carrie, bh}
    # per:parents(Carrie, Debbie) is stored as its canonical relation, in canonical direction
    fam = [i for i in kb.instances if {i.subject, i.object} == {":Carrie_Fisher", ":Debbie_Reynolds"}]
    assert len(fam) == 1
    pred, swap = schema.canonical_of("per:parents")
    assert fam[0].predicate == pred
    assert (fam[0].subject == ":Debbie_Reynolds") == swap


def test_string_slots(corpus, schema):
    kb, _ = read_tac(KB_PATH, corpus, schema)
    by_value = {i.value: i for i in kb.instances if i.value is not None}
    assert set(by_value) == {"actress", "1956-10-21", "singer"}
    # two provenances: first is the filler (a normalised date: its text is not compared)
    dob = by_value["1956-10-21"]
    assert (dob.object_start, dob.object_end) == span_of(corpus, D1, "October 21, 1956")
    # one provenance whose text is the filler: the justification is the sentence holding it
    singer = by_value["singer"]
    assert (singer.object_start, singer.object_end) == span_of(corpus, D1, "singer")
    (b, e), = singer.provenance
    assert corpus.text(D1)[b:e].startswith("Her mother") and corpus.text(D1)[b:e].endswith("singer.")


def test_document_ids_with_hyphens(corpus, schema):
    kb, _ = read_tac(KB_PATH, corpus, schema)
    assert {i.doc for i in kb.instances} == {D1, D2}


def test_round_trip_tac(corpus, schema, tmp_path):
    kb, _ = read_tac(KB_PATH, corpus, schema)
    out = io.StringIO()
    write_tac(out, kb.run_id, kb.entities.values(), kb.mentions, kb.instances, lambda d, s, e: corpus.text(d)[s:e])
    kb2, rep = parse(corpus, schema, out.getvalue())
    assert rep.ok and rep.n_warnings == 0, [d.format() for d in rep.diagnostics]
    assert kb2.instance_set() == kb.instance_set()
    assert {n: (e.type, e.links) for n, e in kb2.entities.items()} == {n: (e.type, e.links) for n, e in kb.entities.items()}
    assert sorted((m.entity, m.doc, m.start, m.end, m.kind, m.canonical) for m in kb2.mentions) == sorted(
        (m.entity, m.doc, m.start, m.end, m.kind, m.canonical) for m in kb.mentions)


def test_tac_and_jsonl_agree(corpus, schema):
    kb, _ = read_tac(KB_PATH, corpus, schema)
    out = io.StringIO()
    write_jsonl(out, kb.entities, kb.instances)
    kb2, rep = read_jsonl(io.BytesIO(out.getvalue().encode()), corpus, schema, path="kb.jsonl")
    assert rep.ok, [d.format() for d in rep.diagnostics]
    assert kb2.instance_set() == kb.instance_set()


def test_gzip_input(corpus, schema, tmp_path):
    gz = tmp_path / "kb.gz"
    gz.write_bytes(gzip.compress(KB_PATH.read_bytes()))
    kb, rep = read_tac(gz, corpus, schema)
    assert rep.ok and rep.counts["instances"] == 9


def test_size_limit(corpus, schema):
    kb, rep = read_tac(KB_PATH, corpus, schema, limits=Limits(max_bytes=500))
    assert kb is None
    assert [d.code for d in rep.errors] == ["UP110"]
    assert "limit of 500 bytes" in rep.errors[0].message


def test_corrupt_gzip(corpus, schema):
    data = gzip.compress(KB_PATH.read_bytes())[:200]
    kb, rep = parse(corpus, schema, data)
    assert kb is None and rep.errors[0].code == "UP100"


def test_a_corrupt_gzip_is_a_located_error_whether_the_format_is_given_or_detected(corpus, schema, tmp_path):
    """A truncated gzip under a name that says no format (as the service stores an upload) crashed the detection
    and the format hint with EOFError: the upload 'failed on the server' instead of being rejected with UP100."""
    from unpooled.core.kb import read_kb

    path = tmp_path / "upload"
    for data in (gzip.compress(KB_PATH.read_bytes())[:200], gzip.compress(KB_PATH.read_bytes())[:12],
                 b"\x1f\x8b\x08\x00garbage"):
        path.write_bytes(data)
        for fmt in (None, "tac", "jsonl"):
            kb, rep = read_kb(path, corpus, schema, fmt=fmt)
            assert kb is None and "UP100" in [d.code for d in rep.errors], (data, fmt)


def test_a_byte_order_mark_does_not_hide_a_jsonl_file(corpus, schema, tmp_path):
    """A JSONL file saved with a UTF-8 byte order mark (Windows editors) was detected as TAC and rejected with
    'the first line must be the run id', though read as JSONL it is valid."""
    from unpooled.core.kb import detect_kb_format, read_kb, sniff_kb_content

    kb, rep = read_tac(KB_PATH, corpus, schema)
    out = io.StringIO()
    write_jsonl(out, kb.entities, kb.instances)
    for data in (b"\xef\xbb\xbf" + out.getvalue().encode(), gzip.compress(b"\xef\xbb\xbf" + out.getvalue().encode())):
        path = tmp_path / "upload"
        path.write_bytes(data)
        assert detect_kb_format(path) == "jsonl" and sniff_kb_content(path) == "jsonl"
        got, rep = read_kb(path, corpus, schema)
        assert rep.ok, rep.to_dict()
        assert got.instance_set() == kb.instance_set()


# -- one case per validation rule -------------------------------------------------
def mutate(find: str, new: str | None, *, append: bool = False):
    """Lines of the fixture with the first line containing ``find`` replaced (or ``new`` appended)."""
    ls = lines()
    if append:
        ls.append(new)
        return ls, len(ls)
    for i, line in enumerate(ls):
        if find in line:
            if new is None:
                del ls[i]
            else:
                ls[i] = new if "{line}" not in new else new.format(line=line)
            return ls, i + 1
    raise AssertionError(f"{find!r} not in the fixture")


def _prov(corpus, doc, s, nth=0):
    b, e = span_of(corpus, doc, s, nth)
    return f"{doc}:{b}-{e - 1}"


CASES = {
    # code: (builder(corpus) -> (lines, line number of the problem), field or None)
    "UP101": lambda c: mutate("per:spouse", ":Carrie_Fisher\tmention\t\"" + "x" * 200 + "\"\tX:1-2"),
    "UP103": lambda c: mutate("per:spouse", ":Carrie_Fisher per:spouse :Paul_Simon"),
    "UP104": lambda c: mutate("fixture_run_1", "fixture run 1"),
    "UP105": lambda c: mutate("per:spouse\t:Paul_Simon", ":Carrie_Fisher\tper:spouse\t:Paul_Simon\tNYT_ENG:12"),
    "UP108": lambda c: mutate("per:spouse\t:Paul_Simon", f":Carrie_Fisher\tper:spouse\t:Paul_Simon\t{D1}:30-20"),
    "UP109": lambda c: mutate("per:spouse\t:Paul_Simon", "{line}x"),
    "UP111": lambda c: mutate("\"the actress\"", f":Carrie_Fisher\tnominal_mention\tthe actress\t{_prov(c, D1, 'the actress')}"),
    "UP201": lambda c: mutate("per:spouse\t:Paul_Simon", ":Carrie_Fisher\tper:spouse\t:Paul_Simon\tNO_SUCH_DOC:0-10"),
    "UP202": lambda c: mutate("per:spouse\t:Paul_Simon", f":Carrie_Fisher\tper:spouse\t:Paul_Simon\t{D1}:10-99999"),
    "UP203": lambda c: mutate("\"the actress\"", f":Carrie_Fisher\tnominal_mention\t\"the actress\"\t{D1}:"
                              f"{span_of(c, D1, 'the actress')[0]}-{span_of(c, D1, 'the actress')[1]}"),
    "UP204": lambda c: mutate("per:spouse\t:Paul_Simon", ":Carrie_Fisher\tper:spouses\t:Paul_Simon\t"
                              + _prov(c, D1, "Fisher was married to Paul Simon.")),
    "UP205": lambda c: mutate("per:spouse\t:Paul_Simon", ":Lucasfilm\tper:spouse\t:Paul_Simon\t"
                              + _prov(c, D1, "Fisher was married to Paul Simon.")),
    "UP206": lambda c: mutate("per:spouse\t:Paul_Simon", ":Carrie_Fisher\tper:spouse\t:Carrie_Fisher\t"
                              + _prov(c, D1, "Fisher was married to Paul Simon.")),
    "UP207": lambda c: mutate("", ":Paul_Simon\ttype\tORG", append=True),
    "UP208": lambda c: mutate("\"singer\"", ":Debbie_Reynolds\tper:title\t\"dancer\"\t" + _prov(c, D1, "singer")),
    "UP209": lambda c: mutate("", [l for l in lines() if "per:spouse\t:Paul_Simon" in l][0], append=True),
    "UP210": lambda c: mutate("per:spouse\t:Paul_Simon", ":Carrie_Fisher\tper:spouse\t:Nobody\t"
                              + _prov(c, D1, "Fisher was married to Paul Simon.")),
    "UP211": lambda c: mutate(":Paul_Simon\ttype\tPER", None),
    "UP213": lambda c: mutate("per:spouse\t:Paul_Simon", ":Carrie_Fisher\tper:spouse\t:Paul_Simon\t"
                              + _prov(c, D2, "Debbie Reynolds founded the Thalians")),
    "UP214": lambda c: mutate("per:spouse\t:Paul_Simon", ":Carrie_Fisher\tper:spouse\t:Paul_Simon\t"
                              + _prov(c, D1, "Paul Simon") + "," + _prov(c, D2, "Hollywood")),
    "UP217": lambda c: mutate(":Paul_Simon\ttype\tPER", ":Paul_Simon\ttype\tPERSON"),
    "UP218": lambda c: mutate("\"singer\"", ":Debbie_Reynolds\tper:title\t:Carrie_Fisher\t" + _prov(c, D1, "singer")),
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_rule_gives_a_located_diagnostic(corpus, schema, code):
    ls, lineno = CASES[code](corpus)
    limits = Limits(max_line=150) if code == "UP101" else Limits()
    kb, rep = parse(corpus, schema, "\n".join(ls) + "\n", limits=limits)
    found = [d for d in rep.diagnostics if d.code == code]
    assert found, f"expected {code}; got {[d.format() for d in rep.diagnostics]}"
    d = found[0]
    if code not in ("UP211",):  # UP211 points at the entity's first line
        assert d.line == lineno, d.format()
    assert d.path == "kb.tac" and d.message
    severity = CODES[code][0]
    assert d.severity == severity
    if severity == "error":
        assert kb is None, "a file with an error is rejected whole"
    else:
        assert kb is not None


def test_offset_hint_suggests_the_inclusive_span(corpus, schema):
    ls, n = CASES["UP203"](corpus)
    _, rep = parse(corpus, schema, "\n".join(ls))
    d = [d for d in rep.diagnostics if d.code == "UP203"][0]
    b, e = span_of(corpus, D1, "the actress")
    assert f"{D1}:{b}-{e - 1}" in d.help and "inclusive" in d.help


def test_unknown_predicate_suggests_close_names(corpus, schema):
    ls, n = CASES["UP204"](corpus)
    _, rep = parse(corpus, schema, "\n".join(ls))
    d = [d for d in rep.diagnostics if d.code == "UP204"][0]
    assert "per:spouse" in d.help


def test_undecodable_bytes(corpus, schema):
    data = KB_PATH.read_bytes().replace(b"\"the actress\"", b"\"the \xff\xfeactress\"")
    kb, rep = parse(corpus, schema, data)
    d = [d for d in rep.errors if d.code == "UP102"][0]
    assert kb is None and d.line == 7 and d.col > 1


def test_empty_file(corpus, schema):
    kb, rep = parse(corpus, schema, "")
    assert kb is None and {d.code for d in rep.errors} == {"UP112"}
    kb, rep = parse(corpus, schema, "only_a_run_id\n")
    assert kb is None and {d.code for d in rep.errors} == {"UP112"}


def test_reference_crashes_are_clear_errors_here(corpus, schema):
    """The reference parser crashed on these (reference-kbp-online.md §10.2)."""
    # self-relation
    ls, n = CASES["UP206"](corpus)
    _, rep = parse(corpus, schema, "\n".join(ls))
    assert [d.code for d in rep.errors] == ["UP206"]
    # conflicting types
    ls, n = CASES["UP207"](corpus)
    _, rep = parse(corpus, schema, "\n".join(ls))
    assert [d.code for d in rep.errors] == ["UP207"]
    first_type = lines().index(":Paul_Simon\ttype\tPER") + 1
    assert f"PER on line {first_type}" in rep.errors[0].message  # names the line of the first type


def test_unknown_predicate_suggests_relations_by_meaning():
    """UX review #12: 'spouse' in a schema of Wikidata codes got no suggestion; now "did you mean P26 (spouse)?",
    and with nothing close, where the relations are listed (the Schema page), not only the command line."""
    from unpooled.core.kb.builder import KBBuilder
    from unpooled.core.schema import load_schema

    docred = load_schema("docred")
    b = KBBuilder.__new__(KBBuilder)
    b.schema = docred
    assert b._predicate_help("spouse") == "did you mean P26 (spouse)?"
    assert "P26 (spouse)" in b._predicate_help("Spouse")
    assert "Schema page" in b._predicate_help("zzz-nothing-like-it")


def test_a_jsonl_field_error_points_at_the_field_and_shows_it(corpus, schema):
    """UX review #12: UP107 said column 0, and the excerpt (a line's first ~120 characters) hid a fault further on.
    Now the column is the field's key, and the excerpt is a window around it."""
    import json

    doc = "NYT_ENG_20130910.0002"
    line = json.dumps({"doc": doc, "predicate": "per:spouse", "note": "x" * 300,
                       "subject": {"start": 0, "end": 5, "entity": "a"},
                       "object": {"start": "nine", "end": 12, "entity": "b"}})
    _, rep = read_jsonl(io.BytesIO((line + "\n").encode()), corpus, schema, path="kb.jsonl")
    d = [d for d in rep.diagnostics if d.code == "UP107"][0]
    assert d.field == "object.start" and d.col == line.index('"start": "nine"') + 1
    assert '"start": "nine"' in d.text and d.text.startswith("\u2026")
