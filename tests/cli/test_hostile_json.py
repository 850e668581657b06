"""Hostile JSON in every file the CLI reads: a JSON text nested deeper than the decoder's recursion, or with an
integer longer than Python converts (4,300 digits), or an object naming a key twice (which value counts?), is a
located error with a non-zero exit, never a traceback nor the last value taken silently."""

from __future__ import annotations

import json

import pytest

from unpooled.cli.main import main

from ..core.test_offline import X1, X2, inst, write_jsonl

DEEP = "[" * 40_000 + "]" * 40_000  # under the line limit (100 kB), past the decoder's recursion limit
LONG_INT = "1" * 5_000  # past sys.get_int_max_str_digits() (4,300)


@pytest.fixture
def files(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    write_jsonl(subs / "A.jsonl", [inst(*X1, entities=("a1", "a2")), inst(*X2, entities=("a1", "a3"))])
    labels = write_jsonl(tmp_path / "L.jsonl", [{"system": "A", **inst(*X1), "label": 1}])
    ex = write_jsonl(tmp_path / "E.jsonl", [inst(*X1)])
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text(json.dumps({"id": "D1", "text": "x" * 40}) + "\n")
    return {"subs": subs, "labels": labels, "ex": ex, "corpus": corpus, "tmp": tmp_path}


def _hostile(tmp_path, kind: str, *, whole: bool = False, first: str = '{"system": "A"}') -> str:
    """A file whose second line (after ``first``; or whole text) is hostile: ``deep`` nesting, a ``long``
    integer in a field, or a ``twice`` named key."""
    bad = {"deep": DEEP, "long": '{"system": "A", "label": ' + LONG_INT + "}",
           "twice": '{"system": "A", "label": 0, "id": "D2", "label": 1}'}[kind]
    if whole:
        bad = {"deep": DEEP, "long": "[" + LONG_INT + "]", "twice": '[{"title": "T", "name": "n", "title": "U"}]'}[kind]
    path = tmp_path / f"{kind}{'.json' if whole else '.jsonl'}"
    path.write_text(bad + "\n" if whole else first + "\n" + bad + "\n")
    return str(path)


def _argv(where: str, f: dict, bad: str) -> list[str]:
    score = ["score", "--labels", f["labels"], "--submissions", f["subs"], "--exhaustive", f["ex"]]
    if where == "labels":
        return [*score[:2], bad, *score[3:]]
    if where == "exhaustive":
        return [*score[:-1], bad]
    if where == "submission":
        (f["subs"] / "B.jsonl").write_text(open(bad).read())
        return score
    if where == "validate":
        return ["validate", bad, "--corpus", f["corpus"], "--corpus-format", "jsonl"]
    if where == "corpus-jsonl":
        return ["validate", f["subs"] / "A.jsonl", "--corpus", bad, "--corpus-format", "jsonl"]
    if where == "corpus-docred":
        return ["validate", f["subs"] / "A.jsonl", "--corpus", bad, "--corpus-format", "docred"]
    return ["schema", "show", bad]  # a schema file


@pytest.mark.parametrize("kind", ["deep", "long", "twice"])
@pytest.mark.parametrize("where", ["labels", "exhaustive", "submission", "validate", "corpus-jsonl",
                                   "corpus-docred", "schema"])
def test_hostile_json_is_a_located_error(capsys, files, where, kind):
    whole = where in ("corpus-docred", "schema")
    first = json.dumps({"id": "D0", "text": "y"}) if where == "corpus-jsonl" else '{"system": "A"}'
    bad = _hostile(files["tmp"], kind, whole=whole, first=first)
    code = main([str(a) for a in _argv(where, files, bad)])
    out, err = capsys.readouterr()
    assert code in (1, 3), (out, err)
    said = out + err
    assert "Traceback" not in said
    name = "B.jsonl" if where == "submission" else bad
    assert name in said  # the file is named
    assert {"deep": "nested", "long": "digits", "twice": "'label' is given twice" if not whole else "'title' is given twice"}[
        kind] in said, said
    if not whole:
        assert f"{name}:2" in said  # and the line


def _sparse(tmp_path, name: str) -> str:
    """A 1 GiB file that takes no disk space: reading it whole took 2.2 GB of memory."""
    path = tmp_path / name
    with open(path, "wb") as fh:
        fh.truncate(1 << 30)
    return str(path)


def test_a_huge_schema_file_is_refused_unread(capsys, tmp_path):
    bad = _sparse(tmp_path, "schema.json")
    assert main(["schema", "show", bad]) == 3
    err = capsys.readouterr().err
    assert bad in err and "larger than" in err and "Traceback" not in err


def test_a_huge_corpus_line_is_refused_unread(capsys, files, tmp_path):
    bad = _sparse(tmp_path, "docs.jsonl")
    assert main(["validate", str(files["subs"] / "A.jsonl"), "--corpus", bad, "--corpus-format", "jsonl"]) == 3
    err = capsys.readouterr().err
    assert f"{bad}:1" in err and "longer than" in err and "Traceback" not in err


@pytest.mark.parametrize("content", ["binary", "sparse", "long field", "bad row"])
def test_a_hostile_spread_file_is_a_located_error(capsys, tmp_path, content):
    """``simulate --spread`` reads a tab-separated file twice (the targets, the TAC reference): bytes that are not
    UTF-8, a 1 GiB sparse file and a field past the csv module's limit were tracebacks."""
    head = "system\tmicro-p\tmicro-r\tmicro-f1\tmicro-p-lto\tmicro-r-lto\tmicro-f1-lto\n"
    path = tmp_path / "spread.tsv"
    if content == "sparse":
        path = tmp_path / _sparse(tmp_path, "spread.tsv")
    elif content == "binary":
        path.write_bytes(head.encode() + b"run1\t0.5\t\xf8\xff\n")
    elif content == "long field":
        path.write_text(head + "run1\t" + "1" * 200_000 + "\t0.5\n")
    else:
        path.write_text(head + "run1\t0.5\t0.5\t0.5\t0.4\t0.4\t0.4\nrun2\t0.5\tx\t0.5\t0.4\t0.4\t0.4\n")
    code = main(["simulate", "pooling-bias", "--trials", "1", "--spread", str(path)])
    err = capsys.readouterr().err
    assert code == 3 and "Traceback" not in err
    assert str(path) in err, err
    if content != "sparse":
        assert f"{path}:" in err  # and the line


@pytest.mark.parametrize("where", ["labels", "exhaustive", "answers", "submit", "submit-server", "spread"])
def test_a_folder_given_for_a_file_is_named_as_one(capsys, files, where):
    """A folder where a file was expected was reported as 'no such file', which sent one looking for a typo."""
    folder = str(files["tmp"])
    score = ["score", "--labels", str(files["labels"]), "--submissions", str(files["subs"]), "--exhaustive",
             str(files["ex"])]
    argv = {"labels": [*score[:2], folder, *score[3:]], "exhaustive": [*score[:-1], folder],
            "answers": [*score, "--answers", folder], "submit": ["submit", folder, "--corpus", "c", "--team", "t"],
            "submit-server": ["submit", folder, "--corpus", "c", "--server", "http://127.0.0.1:9", "--token", "t"],
            "spread": ["simulate", "pooling-bias", "--trials", "1", "--spread", folder]}[where]
    assert main(argv) == 3
    err = capsys.readouterr().err
    assert f"{folder}: a folder, not a file" in err or f"{folder}: a folder, not a file" in err.replace(
        "--spread ", ""), err
