"""Corpus loaders: the real DocRED files, the TAC/text/JSONL fixtures, gzip, format detection, every error."""

from __future__ import annotations

import gzip
import html
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from unpooled.bench.core import HOSTILE_TAC
from unpooled.core.corpus import FORMATS, Document, detect_format, iter_documents
from unpooled.core.corpus.loaders.docred import document_id_base
from unpooled.core.errors import CorpusError

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("UNPOOLED_SHARED_DATA", REPO.parent / "shared" / "data"))
CORPUS = REPO / "tests" / "fixtures" / "corpus"
TAC = CORPUS / "tac"
NW = TAC / "nw" / "APW_ENG_200901.xml"
DF = TAC / "df" / "bolt-eng-DF-200-192451.xml"
CRLF = TAC / "nyt_crlf.sgm"
TEXT = CORPUS / "text"
JSONL = CORPUS / "docs.jsonl"

REDOCRED_DEV = SHARED / "redocred" / "dev_revised.json"
REDOCRED_TEST = SHARED / "redocred" / "test_revised.json"
HWE = SHARED / "docred_hwe" / "dev_keys_new.json"

needs_real = pytest.mark.skipif(
    not (REDOCRED_DEV.is_file() and REDOCRED_TEST.is_file() and HWE.is_file()),
    reason=f"real DocRED data not found under {SHARED} (redocred/*_revised.json, docred_hwe/dev_keys_new.json)",
)

WS = re.compile(r"\s+")


def load(path, fmt, **kw) -> list[Document]:
    return list(iter_documents(path, fmt, **kw))


def by_id(docs) -> dict[str, Document]:
    return {d.id: d for d in docs}


def gz(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(gzip.compress(src.read_bytes()))
    return dst


# ---------------------------------------------------------------------------
# the real DocRED files
# ---------------------------------------------------------------------------

# file: (documents, mentions, entities, relations, mention names differing from their span)
REAL_COUNTS = {
    "dev": (500, 13189, 9684, 17284, 3),
    "test": (500, 13018, 9779, 17448, 3),
    "hwe": (699, 18352, 13716, 7342, 3),
}
REAL_PATHS = {"dev": REDOCRED_DEV, "test": REDOCRED_TEST, "hwe": HWE}


@pytest.fixture(scope="module")
def real():
    out = {}
    for key, path in REAL_PATHS.items():
        warnings: list = []
        docs = load(path, "docred", warnings=warnings)
        out[key] = (docs, json.loads(path.read_text(encoding="utf-8")), warnings)
    return out


@needs_real
@pytest.mark.parametrize("key", list(REAL_COUNTS))
def test_real_counts(real, key):
    docs, _, warnings = real[key]
    n_docs, n_mentions, n_entities, n_relations, n_warnings = REAL_COUNTS[key]
    assert len(docs) == n_docs
    assert sum(len(e.mentions) for d in docs for e in d.entities) == n_mentions
    assert sum(len(d.entities) for d in docs) == n_entities
    assert sum(len(d.relations) for d in docs) == n_relations
    assert len(warnings) == n_warnings
    assert all(isinstance(w, CorpusError) and w.field.endswith(".name") for w in warnings)


@needs_real
def test_real_redocred_totals_match_the_readme(real):
    docs = real["dev"][0] + real["test"][0]
    assert len(docs) == 1000
    assert sum(len(d.entities) for d in docs) == 19_463
    assert sum(len(e.mentions) for d in docs for e in d.entities) == 26_207
    assert sum(len(d.relations) for d in docs) == 34_732
    assert {e.type for d in docs for e in d.entities} == {"PER", "ORG", "LOC", "TIME", "NUM", "MISC"}
    assert len({r.predicate for d in docs for r in d.relations}) == 96


@needs_real
@pytest.mark.parametrize("key", list(REAL_COUNTS))
def test_real_text_sentences_and_spans(real, key):
    docs, raw, warnings = real[key]
    warned = {w.field for w in warnings}
    for i, (doc, r) in enumerate(zip(docs, raw)):
        assert doc.title == html.unescape(r["title"])  # "&amp;" decoded in the shown title
        assert doc.text == " ".join(t for s in r["sents"] for t in s)
        assert " ".join(doc.text[s:e] for s, e in doc.sentences) == doc.text
        assert [doc.text[s:e] for s, e in doc.sentences] == [" ".join(s) for s in r["sents"]]
        assert len(doc.relations) == len(r.get("labels", []))
        for e in doc.entities:
            assert e.type == e.mentions[0].type
            for k, m in enumerate(e.mentions):
                raw_m = r["vertexSet"][e.index][k]
                a, b = raw_m["pos"]
                span = doc.text[m.start:m.end]
                # the span is exactly the mention's tokens, inside its sentence
                assert span == " ".join(r["sents"][raw_m["sent_id"]][a:b])
                s, t = doc.sentences[m.sentence]
                assert s <= m.start < m.end <= t
                # the name matches (up to whitespace) except the warned-about mentions
                if f"[{i}].vertexSet[{e.index}][{k}].name" not in warned:
                    assert WS.sub("", span) == WS.sub("", raw_m["name"])


@needs_real
def test_real_known_name_mismatches(real):
    names = sorted(re.search(r"name ('.*?'|\".*?\") differs", str(w)).group(1) for w in real["dev"][2])
    assert names == ["'0.\\nThe Swingles'", "'4.\\nTwo'", "'7.\\n100 years'"]


@needs_real
def test_real_hwe_ids_and_texts_match_redocred(real):
    redocred = by_id(real["dev"][0] + real["test"][0])
    assert len(redocred) == 1000  # ids are unique over dev+test
    hwe = real["hwe"][0]
    assert len(hwe) == 699
    assert all(d.id in redocred for d in hwe)  # all 699 HWE titles occur in Re-DocRED
    assert all(redocred[d.id].text == d.text for d in hwe)
    dev_ids = {d.id for d in real["dev"][0]}
    assert sum(d.id in dev_ids for d in hwe) == 360


@needs_real
def test_real_folder_and_detection(tmp_path):
    assert detect_format(REDOCRED_DEV) == "docred"
    assert detect_format(SHARED / "redocred") == "docred"
    docs = load(SHARED / "redocred", "docred")  # dev, then test (sorted)
    assert len(docs) == 1000
    assert docs[0].source.startswith(f"docred:{REDOCRED_DEV}#")
    # the same file twice in one load: duplicate ids, both places named
    shutil.copy(REDOCRED_DEV, tmp_path / "a.json")
    gz(REDOCRED_DEV, tmp_path / "b.json.gz")
    with pytest.raises(CorpusError, match=r"duplicate document id .*b\.json\.gz#0; first at docred:.*a\.json#0") as ei:
        load(tmp_path, "docred")
    assert ei.value.field == "id"


# ---------------------------------------------------------------------------
# DocRED: small synthetic files for ids and errors
# ---------------------------------------------------------------------------

def docred_doc(title="Alpha Beta", **over):
    doc = {
        "title": title,
        "sents": [["Alpha", "Beta", "met", "Gamma", "."], ["He", "left", "55.5", "%", "."]],
        "vertexSet": [
            [{"name": "Alpha Beta", "pos": [0, 2], "sent_id": 0, "type": "PER"},
             {"name": "He", "pos": [0, 1], "sent_id": 1, "type": "PRON"}],
            [{"name": "Gamma", "pos": [3, 4], "sent_id": 0, "type": "LOC"}],
            [{"name": "55.5%", "pos": [2, 4], "sent_id": 1, "type": "NUM"}],
        ],
        "labels": [{"h": 0, "t": 1, "r": "P27", "evidence": [0]}],
    }
    doc.update(over)
    return doc


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_docred_small(tmp_path):
    path = write_json(tmp_path / "d.json", [docred_doc()])
    warnings: list = []
    (doc,) = load(path, "docred", warnings=warnings)
    assert warnings == []  # "55.5%" vs "55.5 %" differs only in whitespace
    assert doc.id == "Alpha_Beta" and doc.title == "Alpha Beta"
    assert doc.text == "Alpha Beta met Gamma . He left 55.5 % ."
    assert doc.sentences == [(0, 22), (23, 39)]
    e0, e1, e2 = doc.entities
    assert (e0.index, e0.type, e0.name) == (0, "PER", "Alpha Beta")
    assert [(m.start, m.end, m.type, m.sentence, m.entity) for m in e0.mentions] == [
        (0, 10, "PER", 0, 0), (23, 25, "PRON", 1, 0)]
    assert doc.text[e2.mentions[0].start:e2.mentions[0].end] == "55.5 %"
    assert doc.relations[0].subject == 0 and doc.relations[0].object == 1
    assert doc.relations[0].predicate == "P27" and doc.relations[0].evidence == (0,)


def test_docred_ids_from_titles(tmp_path):
    docs = [docred_doc("Same  title"), docred_doc(" Other\ttitle "), docred_doc("Same title"),
            docred_doc("Same_title"), docred_doc("")]
    path = write_json(tmp_path / "d.json", docs)
    assert [d.id for d in load(path, "docred")] == [
        "Same_title", "Other_title", "Same_title#2", "Same_title#3", "untitled"]
    assert document_id_base("I, Frankenstein") == "I,_Frankenstein"



def test_docred_title_entities_are_decoded_but_not_in_the_id(tmp_path):
    """Re-DocRED has a title 'TMF (UK &amp; Ireland)': shown decoded; the id, which submissions use, is unchanged."""
    path = write_json(tmp_path / "d.json", [docred_doc("TMF (UK &amp; Ireland)")])
    (doc,) = load(path, "docred")
    assert doc.title == "TMF (UK & Ireland)" and doc.id == "TMF_(UK_&amp;_Ireland)"


def test_docred_without_labels_has_no_relations(tmp_path):
    doc = docred_doc()
    del doc["labels"]
    path = write_json(tmp_path / "test.json", [doc])
    (d,) = load(path, "docred")
    assert d.relations == [] and len(d.entities) == 3


def test_docred_name_mismatch_is_a_warning(tmp_path):
    doc = docred_doc()
    doc["vertexSet"][1][0]["name"] = "Delta"
    path = write_json(tmp_path / "d.json", [doc])
    (d,) = load(path, "docred")  # no error without a warnings list
    warnings: list = []
    load(path, "docred", warnings=warnings)
    assert len(warnings) == 1
    w = warnings[0]
    assert w.field == "[0].vertexSet[1][0].name"
    assert "document 0 ('Alpha Beta') entity 1 mention 0: name 'Delta' differs from the text 'Gamma'" in str(w)
    assert d.entities[1].name == "Delta"  # no mention matches: the first mention's name


def _bad(doc_update=None, mutate=None):
    doc = docred_doc(**(doc_update or {}))
    if mutate:
        mutate(doc)
    return doc


@pytest.mark.parametrize("doc, field, message", [
    ("not a dict", r"", "expected a JSON object"),
    (_bad(mutate=lambda d: d.pop("title")), r"\.title", "'title' missing"),
    (_bad({"sents": "x"}), r"\.sents", "'sents' missing or not a list"),
    (_bad({"sents": [["a"], []]}), r"\.sents\[1\]", "sentence is not a non-empty list"),
    (_bad({"sents": [["a", 3]]}), r"\.sents\[0\]\[1\]", "token is not a string"),
    (_bad(mutate=lambda d: d.pop("vertexSet")), r"\.vertexSet", "'vertexSet' missing"),
    (_bad({"vertexSet": [[]]}), r"\.vertexSet\[0\]", "entity 0 is not a non-empty list"),
    (_bad(mutate=lambda d: d["vertexSet"][1][0].pop("name")), r"\.vertexSet\[1\]\[0\]\.name", "'name'"),
    (_bad(mutate=lambda d: d["vertexSet"][1][0].pop("type")), r"\.vertexSet\[1\]\[0\]\.type", "'type'"),
    (_bad(mutate=lambda d: d["vertexSet"][1][0].update(sent_id=2)), r"\.vertexSet\[1\]\[0\]\.sent_id",
     "'sent_id' 2 is not a sentence index"),
    (_bad(mutate=lambda d: d["vertexSet"][1][0].update(pos=[3, 9])), r"\.vertexSet\[1\]\[0\]\.pos",
     r"'pos' \[3, 9\] is not a token range"),
    (_bad(mutate=lambda d: d["vertexSet"][1][0].update(pos=[3, 3])), r"\.vertexSet\[1\]\[0\]\.pos", "'pos'"),
    (_bad({"labels": {}}), r"\.labels", "'labels' is not a list"),
    (_bad({"labels": [{"h": 0, "t": 7, "r": "P1"}]}), r"\.labels\[0\]\.t", "'t' 7 is not an entity index"),
    (_bad({"labels": [{"h": True, "t": 1, "r": "P1"}]}), r"\.labels\[0\]\.h", "'h' True"),
    (_bad({"labels": [{"h": 0, "t": 1}]}), r"\.labels\[0\]\.r", "'r' missing"),
    (_bad({"labels": [{"h": 0, "t": 1, "r": "P1", "evidence": [5]}]}), r"\.labels\[0\]\.evidence", "evidence"),
])
def test_docred_errors(tmp_path, doc, field, message):
    path = write_json(tmp_path / "bad.json", [docred_doc(), doc])
    with pytest.raises(CorpusError, match=rf"bad\.json: document 1.*{message}.* \[\[1\]{field}\]$") as ei:
        load(path, "docred")
    assert ei.value.path == str(path) and ei.value.line == 0


def test_docred_file_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[\n{"title": "x",\n "sents": [}\n]', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.json:3: invalid JSON"):
        load(bad, "docred")
    write_json(bad, {"title": "x"})
    with pytest.raises(CorpusError, match=r"bad\.json:1: expected a JSON list of documents"):
        load(bad, "docred")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="no .json files"):
        load(tmp_path / "empty", "docred")


# ---------------------------------------------------------------------------
# TAC source documents
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tac_docs():
    return load(TAC, "tac")


def test_tac_folder(tac_docs):
    # sorted by relative path: df/..., nw/..., nyt_crlf.sgm; documents in file order
    assert [d.id for d in tac_docs] == [
        "bolt-eng-DF-200-192451-5799099", "bolt-eng-DF-200-192451-5799100",
        "APW_ENG_20090101.0001", "APW_ENG_20090101.0002",
        "NYT19980206.0460", "XIN_ENG_19980207.0001",
    ]
    assert [d.title for d in tac_docs] == [
        "Who runs Acme?", "", "Smith & Sons open a plant in St. Louis", "Weather", "A CRLF story", ""]
    assert [d.source for d in tac_docs] == [
        f"tac:{DF}:1", f"tac:{DF}:15", f"tac:{NW}:1", f"tac:{NW}:17", f"tac:{CRLF}:1", f"tac:{CRLF}:13"]
    for d in tac_docs:
        assert re.match(r"<(DOC|doc)[\s>]", d.text) and re.search(r"</(DOC|doc)>\Z", d.text)
        for s, e in d.sentences:
            assert "<" not in d.text[s:e] and ">" not in d.text[s:e]


def test_tac_text_is_the_raw_source(tac_docs):
    docs = by_id(tac_docs)
    raw = NW.read_bytes().decode("utf-8")
    first, second = docs["APW_ENG_20090101.0001"], docs["APW_ENG_20090101.0002"]
    assert raw == first.text + "\n" + second.text + "\n"
    # hand-checked offsets (counted from the "<" of "<DOC")
    assert first.text[58:100] == "Smith &amp; Sons open a plant in St. Louis"  # headline, entity kept raw
    assert first.text[64:69] == "&amp;"
    assert (58, 100) in first.sentences
    # character (not byte) offsets: "ü" is one character, two bytes
    assert second.text[88:108] == "Snow fell in Zürich."
    assert second.text[109:124] == "Schools closed!"
    assert second.sentences == [(57, 64), (88, 108), (109, 124)]
    assert second.text.encode("utf-8").find(b"Schools") == 110
    df = docs["bolt-eng-DF-200-192451-5799099"]
    assert df.text[329:337] == "Jane Doe"
    assert [df.text[s:e] for s, e in df.sentences][-2:] == ["Jane Doe became CEO in 2011.", "She replaced Bob Roe."]
    assert docs["bolt-eng-DF-200-192451-5799100"].text[103:125] == "No headline here &lt;3"


def test_tac_crlf_is_kept(tac_docs):
    assert b"\r\n" in CRLF.read_bytes() and b"\n" not in CRLF.read_bytes().replace(b"\r\n", b"")
    docs = by_id(tac_docs)
    d = docs["NYT19980206.0460"]
    assert d.text.count("\r\n") == 11 and d.text.endswith("</DOC>")
    # hand-counted: 7 + 35 + 33 + 12 = 87 characters precede the headline text (each line end is 2)
    assert d.text[87:99] == "A CRLF story"
    assert d.text[122:150] == "Dr. Ann Lee lives in Boston."
    assert d.text[143:149] == "Boston"
    assert d.text[154:171] == "She works at MIT."  # after "\r\n\r\n": a paragraph break
    assert (122, 150) in d.sentences and (154, 171) in d.sentences
    x = docs["XIN_ENG_19980207.0001"]
    assert x.text[55:97] == "Beijing, Feb. 7 (Xinhua) -- China said so."
    assert (55, 97) in x.sentences


def test_tac_single_file_and_gzip(tmp_path, tac_docs):
    expected = [d for d in tac_docs if d.source.startswith(f"tac:{CRLF}:")]
    plain = load(CRLF, "tac")
    assert [(d.id, d.text, d.sentences) for d in plain] == [(d.id, d.text, d.sentences) for d in expected]
    zipped = load(gz(CRLF, tmp_path / "nyt_crlf.sgm.gz"), "tac")
    assert [(d.id, d.text, d.sentences) for d in zipped] == [(d.id, d.text, d.sentences) for d in expected]
    # gzip sniffed by magic bytes, whatever the name
    sniffed = load(gz(CRLF, tmp_path / "nyt_crlf_compressed"), "tac")
    assert [d.text for d in sniffed] == [d.text for d in expected]


def _tac(tmp_path, content: str, name="src.xml") -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8"))
    return path


def test_tac_errors(tmp_path):
    with pytest.raises(CorpusError, match=r"src\.xml:1: no <DOC> element found.*\[DOC\]"):
        load(_tac(tmp_path, "just text\n<DOCID> X </DOCID>\n"), "tac")
    unclosed = '<DOC id="A">\n<TEXT>x</TEXT>\n</DOC>\n\n<DOC id="B">\n<TEXT>y</TEXT>\n'
    with pytest.raises(CorpusError, match=r'src\.xml:5: <DOC id="B"> is not closed by </DOC> \[DOC\]'):
        load(_tac(tmp_path, unclosed), "tac")
    nested = '<DOC id="A">\n<TEXT>x</TEXT>\n<DOC id="B">\n</DOC>\n'
    with pytest.raises(CorpusError, match=r'src\.xml:1: <DOC id="A"> is not closed'):
        load(_tac(tmp_path, nested), "tac")
    with pytest.raises(CorpusError, match=r"src\.xml:2: document has no id.*\[id\]"):
        load(_tac(tmp_path, '<DOC id="A"></DOC>\n<DOC>\n<TEXT>x</TEXT>\n</DOC>'), "tac")
    with pytest.raises(CorpusError, match=r"src\.xml:1: invalid document id 'A B'.*\[id\]"):
        load(_tac(tmp_path, "<DOC>\n<DOCNO> A B </DOCNO>\n</DOC>"), "tac")
    with pytest.raises(CorpusError, match=r"src\.xml:3: duplicate document id 'A' \(first at tac:.*src\.xml:1\) \[id"):
        load(_tac(tmp_path, "<doc id='A'>\n</doc>\n<DOC>\n<DOCID>A</DOCID>\n</DOC>"), "tac")
    bad = tmp_path / "latin1.xml"
    bad.write_bytes('<DOC id="A">\ncaf\xe9\n</DOC>'.encode("latin-1"))
    with pytest.raises(CorpusError, match=r"latin1\.xml:2: not valid UTF-8 at byte offset 16 \(byte 0xe9\)"):
        load(bad, "tac")
    with pytest.raises(CorpusError, match=r"nowhere: no such file or folder"):
        load(tmp_path / "nowhere", "tac")


def test_tac_duplicate_across_files(tmp_path):
    _tac(tmp_path, '<DOC id="A">\n</DOC>\n', "one.xml")
    _tac(tmp_path, '\n\n<DOC id="A">\n</DOC>\n', "two.xml")
    with pytest.raises(CorpusError, match=r"two\.xml:3: duplicate document id 'A' .*first at tac:.*one\.xml:1"):
        load(tmp_path, "tac")


# ---------------------------------------------------------------------------
# plain text
# ---------------------------------------------------------------------------

def test_text_folder():
    docs = load(TEXT, "text")
    assert [d.id for d in docs] == ["alpha", "news/beta"]  # .hidden.txt and notes.md skipped
    alpha, beta = docs
    assert alpha.title == "Alpha report" and beta.title == "Beta news"
    assert alpha.text == (TEXT / "alpha.txt").read_text(encoding="utf-8")
    assert beta.text == (TEXT / "news" / "beta.txt").read_bytes().decode("utf-8")  # "\r\n" kept
    assert "\r\n" in beta.text
    assert [alpha.text[s:e] for s, e in alpha.sentences] == [
        "Alpha report\nThe first line above is the title.", "Dr. Who wrote it.",
        "A new paragraph starts here\nwithout a full stop"]
    assert beta.sentences == [(0, 40), (41, 53)]
    assert alpha.source == f"text:{TEXT / 'alpha.txt'}"
    assert detect_format(TEXT) == "text"


def test_text_single_file_gzip_bom_and_title(tmp_path):
    (doc,) = load(TEXT / "news" / "beta.txt", "text")
    assert doc.id == "beta"
    gz(TEXT / "news" / "beta.txt", tmp_path / "corpus" / "deep" / "beta.txt.gz")
    long = tmp_path / "corpus" / "long.txt"
    long.write_bytes(b"\xef\xbb\xbf  " + b"x" * 300 + b"\nSecond line.")
    docs = load(tmp_path / "corpus", "text")
    assert [d.id for d in docs] == ["deep/beta", "long"]
    assert docs[0].text == doc.text
    assert docs[1].title == "x" * 200
    assert docs[1].text.startswith("  x")  # the byte-order mark is dropped
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    (e,) = load(empty, "text")
    assert (e.id, e.title, e.text, e.sentences) == ("empty", "", "", [])


def test_text_errors(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(CorpusError, match=r"bad\.txt:2: not valid UTF-8 at byte offset 14 \(byte 0xff\) \[encoding\]"):
        load(tmp_path, "text")
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "x.md").write_text("x", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"none: no \.txt files"):
        load(tmp_path / "none", "text")


# ---------------------------------------------------------------------------
# JSONL
# ---------------------------------------------------------------------------

def test_jsonl_good():
    docs = load(JSONL, "jsonl")
    assert [(d.id, d.title) for d in docs] == [("j1", "First"), ("j2", ""), ("j3", "")]
    assert docs[0].sentences == [(0, 14), (15, 27)]  # given
    assert docs[1].sentences == [(0, 21), (22, 35)]  # split
    assert docs[2].text == "" and docs[2].sentences == []
    assert [d.source for d in docs] == [f"jsonl:{JSONL}:1", f"jsonl:{JSONL}:3", f"jsonl:{JSONL}:5"]
    assert detect_format(JSONL) == "jsonl"


GOOD = '{"id": "ok", "text": "Fine. Text."}'


@pytest.mark.parametrize("line, field, message", [
    ('{"id": "x", "text": "abc"', "", r"invalid JSON: .* \(column \d+\)"),
    ('["x", "abc"]', "", "expected a JSON object, got list"),
    ('{"text": "abc"}', "id", "missing 'id'"),
    ('{"id": 7, "text": "abc"}', "id", "'id' must be a non-empty string, got 7"),
    ('{"id": " ", "text": "abc"}', "id", "'id' must be a non-empty string"),
    ('{"id": "x"}', "text", "missing 'text'"),
    ('{"id": "x", "text": ["abc"]}', "text", "'text' must be a string, got list"),
    ('{"id": "x", "text": "abc", "title": 3}', "title", "'title' must be a string, got int"),
    ('{"id": "x", "text": "abc", "sentences": "0-3"}', "sentences", "'sentences' must be a list"),
    ('{"id": "x", "text": "abc", "sentences": [[0, 1, 2]]}', "sentences", r"sentence 0: expected \[start, end\]"),
    ('{"id": "x", "text": "abc", "sentences": [[0, true]]}', "sentences", r"sentence 0: expected \[start, end\]"),
    ('{"id": "x", "text": "abc", "sentences": [[0, 4]]}', "sentences", r"\[0, 4\] is empty or outside the text"),
    ('{"id": "x", "text": "abc", "sentences": [[-1, 2]]}', "sentences", "outside the text"),
    ('{"id": "x", "text": "abc", "sentences": [[1, 1]]}', "sentences", r"\[1, 1\] is empty"),
    ('{"id": "x", "text": "abc", "sentences": [[0, 2], [1, 3]]}', "sentences", r"sentence 1: \[1, 3\] overlaps"),
    ('{"id": "x", "text": "abc", "sentences": [[2, 3], [0, 1]]}', "sentences", "overlaps or precedes"),
    ('{"id": "ok", "text": "again"}', "id", r"duplicate document id 'ok' \(first at jsonl:.*bad\.jsonl:1\)"),
])
def test_jsonl_bad_lines(tmp_path, line, field, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(GOOD + "\n\n" + line + "\n", encoding="utf-8")
    tail = rf" \[{field}\]$" if field else r"$"
    with pytest.raises(CorpusError, match=rf"bad\.jsonl:3: .*{message}.*{tail}") as ei:
        load(path, "jsonl")
    assert (ei.value.path, ei.value.line, ei.value.field) == (str(path), 3, field)


def test_jsonl_encoding_gzip_and_folders(tmp_path):
    bad = tmp_path / "enc.jsonl"
    bad.write_bytes(GOOD.encode() + b"\n" + b'{"id": "y", "text": "\xc3("}\n')
    with pytest.raises(CorpusError, match=r"enc\.jsonl:2: not valid UTF-8 at byte offset 57 \(byte 0xc3\)"):
        load(bad, "jsonl")
    # gzip, a BOM, CRLF line ends, a folder of files read in sorted order, duplicates across files
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "b.jsonl").write_bytes(b"\xef\xbb\xbf" + GOOD.encode() + b"\r\n")
    gz(JSONL, folder / "a.jsonl.gz")
    assert [d.id for d in load(folder, "jsonl")] == ["j1", "j2", "j3", "ok"]
    assert detect_format(folder) == "jsonl"
    (folder / "c.jsonl").write_text('\n{"id": "j2", "text": "x"}\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"c\.jsonl:2: duplicate document id 'j2' .*first at jsonl:.*a\.jsonl\.gz:3"):
        load(folder, "jsonl")
    trunc = tmp_path / "trunc.jsonl.gz"
    trunc.write_bytes(gzip.compress(JSONL.read_bytes())[:-12])
    with pytest.raises(CorpusError, match=r"trunc\.jsonl\.gz: cannot read"):
        load(trunc, "jsonl")


# ---------------------------------------------------------------------------
# format detection and dispatch
# ---------------------------------------------------------------------------

def test_detect_format(tmp_path):
    assert FORMATS == ("docred", "tac", "text", "jsonl")
    assert detect_format(TAC) == "tac"
    assert detect_format(NW) == "tac" and detect_format(CRLF) == "tac"
    assert detect_format(TEXT / "alpha.txt") == "text"
    # content beats the suffix; gzip is looked through, with or without ".gz"
    (tmp_path / "sources.txt").write_text('<?xml version="1.0"?>\n<doc id="x">\n</doc>\n', encoding="utf-8")
    assert detect_format(tmp_path / "sources.txt") == "tac"
    assert detect_format(gz(JSONL, tmp_path / "docs")) == "jsonl"
    assert detect_format(gz(NW, tmp_path / "z" / "nw.xml.gz")) == "tac"
    write_json(tmp_path / "d.json", [docred_doc()])
    assert detect_format(tmp_path / "d.json") == "docred"
    assert detect_format(gz(tmp_path / "d.json", tmp_path / "d.json.gz")) == "docred"
    (tmp_path / "mystery.bin").write_text("what is this", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"mystery\.bin: cannot detect the corpus format; pass --format"):
        detect_format(tmp_path / "mystery.bin")
    with pytest.raises(CorpusError, match="files of several formats"):
        detect_format(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="empty folder"):
        detect_format(tmp_path / "empty")
    with pytest.raises(CorpusError, match="no such file or folder"):
        detect_format(tmp_path / "missing")


def test_unknown_format():
    with pytest.raises(CorpusError, match=r"unknown corpus format 'xml'.*\[format\]"):
        load(JSONL, "xml")


def test_documents_stream(tmp_path):
    # a generator: the first document arrives before a later file's error is met
    _tac(tmp_path, '<DOC id="A">\n</DOC>\n', "a.xml")
    _tac(tmp_path, "no documents here", "b.xml")
    it = iter_documents(tmp_path, "tac")
    assert next(it).id == "A"
    with pytest.raises(CorpusError, match=r"b\.xml:1: no <DOC>"):
        next(it)


@pytest.mark.parametrize("body", HOSTILE_TAC)
def test_hostile_tac_markup_is_read(body):
    """Half a megabyte of unclosed tags took minutes (the tag patterns rescanned the rest of the file from each
    opening); it gives the usual located error or documents.  How fast: ``unpooled bench core``
    (``hostile_tac_seconds``), not a timing assertion here."""
    from unpooled.core.corpus.loaders.tac import parse_tac

    try:
        list(parse_tac(body, "hostile.xml"))
    except CorpusError as exc:
        assert "hostile.xml:" in str(exc)


@pytest.mark.parametrize("fmt", ["docred", "tac"])
def test_a_gzip_bomb_is_read_no_further_than_the_limit(tmp_path, monkeypatch, fmt):
    """A file read whole (DocRED, TAC sources) was decompressed to its end: a few MB of gzip may hold many GB.
    Reading now stops at the limit (here lowered to 1 MB: 8 MB of zeros, 8 kB compressed)."""
    from unpooled.core.corpus import loaders

    monkeypatch.setattr(loaders, "MAX_FILE_BYTES", 1 << 20, raising=False)
    path = tmp_path / ("bomb.json.gz" if fmt == "docred" else "bomb.xml.gz")
    with gzip.open(path, "wb") as fh:
        fh.write(b"[" if fmt == "docred" else b"<DOC>")
        for _ in range(8):
            fh.write(b" " * (1 << 20))
    with pytest.raises(CorpusError, match=r"larger than 1,048,576 bytes \(decompressed\)"):
        list(iter_documents(path, fmt))
