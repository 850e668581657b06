"""The command line: output formats, exit statuses, offline and stored corpora."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from unpooled.cli.main import main

from ..conftest import FIXTURES

KB = FIXTURES / "kb" / "coldstart.kb"
SOURCES = FIXTURES / "kb" / "sources.xml"


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def bad_kb(tmp_path):
    p = tmp_path / "bad.kb"
    p.write_text(KB.read_text().replace("per:spouse\t:Paul_Simon", "per:spouse\t:Carrie_Fisher", 1))
    return p


def test_validate_offline_json(capsys):
    code, out, _ = run(capsys, "validate", KB, "--corpus", SOURCES, "--corpus-format", "tac", "--json")
    rep = json.loads(out)
    assert code == 0
    assert rep["ok"] is True and rep["errors"] == [] and rep["warnings"] == []
    assert rep["counts"]["instances"] == 9 and rep["counts"]["lines"] == len(KB.read_text().splitlines())


def test_validate_rejects_with_located_errors(capsys, tmp_path):
    code, out, _ = run(capsys, "validate", bad_kb(tmp_path), "--corpus", SOURCES, "--json")
    rep = json.loads(out)
    assert code == 1 and rep["ok"] is False
    e = rep["errors"][0]
    assert set(e) >= {"line", "code", "message"} and e["code"] == "UP206"
    code, out, _ = run(capsys, "validate", bad_kb(tmp_path), "--corpus", SOURCES)
    first = out.splitlines()[0]
    assert first.startswith(f"{tmp_path / 'bad.kb'}:{e['line']}:") and "UP206 self-relation" in first
    assert "rejected: 1 error(s)" in out


def test_missing_file_and_usage(capsys, tmp_path):
    code, _, err = run(capsys, "validate", tmp_path / "nope.kb", "--corpus", SOURCES)
    assert code == 3 and "nope.kb: no such file" in err
    with pytest.raises(SystemExit) as exc:
        main(["validate"])
    assert exc.value.code == 2


def test_schema_commands(capsys):
    code, out, _ = run(capsys, "schema", "list", "--json")
    names = {r["name"] for r in json.loads(out)}
    assert code == 0 and names == {"tac-kbp", "docred"}
    code, out, _ = run(capsys, "schema", "show", "tac-kbp")
    assert "per:spouse" in out and "symmetric" in out
    code, _, err = run(capsys, "schema", "show", "nonsense")
    assert code == 3 and "unknown schema 'nonsense'" in err


@pytest.mark.django_db
def test_corpus_submit_export(capsys, tmp_path):
    code, out, _ = run(capsys, "corpus", "load", SOURCES, "--format", "tac", "--name", "fx", "--json")
    assert code == 0 and json.loads(out)["documents"] == 2
    code, out, _ = run(capsys, "corpus", "list", "--json")
    assert [c["name"] for c in json.loads(out)] == ["fx"]
    code, out, _ = run(capsys, "validate", KB, "--corpus", "fx", "--json")
    assert code == 0 and json.loads(out)["ok"]
    code, out, _ = run(capsys, "submit", KB, "--corpus", "fx", "--team", "t1", "--run", "r1", "--json")
    res = json.loads(out)
    assert code == 0 and res["ok"] and res["counts"]["instances"] == 9
    sid = res["submission"]
    code, out, _ = run(capsys, "submit", KB, "--corpus", "fx", "--team", "t1", "--run", "r2")
    assert code == 0 and f"already submitted: this file is submission {sid}" in out
    code, out, err = run(capsys, "submit", bad_kb(tmp_path), "--corpus", "fx", "--team", "t1", "--run", "r3")
    assert code == 1 and "UP206" in out and "nothing was stored" in err
    code, out, _ = run(capsys, "submission", "export", sid, "--format", "tac")
    assert code == 0 and out.splitlines()[0] == "r1"
    assert sum(1 for l in out.splitlines() if l.split("\t")[1:2] and ":" in l.split("\t")[1]) == 9
    code, out, _ = run(capsys, "submission", "list", "--json")
    assert [r["id"] for r in json.loads(out)] == [sid]
    code, _, err = run(capsys, "submission", "export", 999, "--format", "jsonl")
    assert code == 3 and "no submission with id 999" in err


def test_python_m_unpooled_is_the_command():
    """``python -m unpooled`` (a checkout's sources on the path, no entry point) runs the same command."""
    out = subprocess.run([sys.executable, "-m", "unpooled", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("unpooled ")


def test_core_import_has_no_django():
    code = ("import sys, unpooled.core.kb, unpooled.core.corpus, unpooled.core.schema, unpooled.core.diagnostics;"
            "bad = [m for m in ('django', 'boto3') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bench_score_reports_time_and_memory(capsys):
    """``unpooled bench score --instances N [--votes] --json`` prints its figures (tiny sizes: no timing claims)."""
    import json as _json

    from unpooled.cli.main import main as _main

    assert _main(["bench", "score", "--systems", "3", "--labels", "20", "--exhaustive", "30", "--replicates", "5",
                  "--instances", "500", "--votes", "--json"]) == 0
    got = _json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert got["systems"] == 3 and got["instances"] == 500 and got["votes"] is True
    # the report names its figures (the figures themselves are the benchmark's, not a test's)
    assert all(isinstance(got[k], (int, float)) for k in ("seconds", "cpu_seconds", "peak_rss_mb"))


@pytest.mark.parametrize("argv", [["validate", "nothere.jsonl", "--corpus", "/nonexistent"],  # a command's error
                                  ["schema", "show", "/nonexistent/schema.json"]])
def test_traceback_shows_the_traceback_and_keeps_the_exit_status(capsys, argv):
    """--traceback adds the traceback; the exit status stays 3 (an error that is not the file's), as the docs say:
    the exception escaped before and Python exited 1, which reads as 'the file has errors'."""
    code, _, err = run(capsys, *argv)
    assert code == 3 and "Traceback" not in err
    code, _, err = run(capsys, "--traceback", *argv)
    assert code == 3 and "Traceback (most recent call last)" in err and "unpooled: error:" in err


def test_a_reader_that_stops_reading_gets_no_error_message():
    """``unpooled … | head``: the reader closes the pipe, and the command printed "unpooled: error: Broken pipe" and
    exited 3, as an error of its own.  It stops quietly now, with the status a shell gives a command the closed pipe
    ended (141), and Python's flush at exit reports nothing either."""
    proc = subprocess.Popen([sys.executable, "-m", "unpooled", "schema", "show", "docred", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before it writes: its first write meets a pipe nobody reads (EPIPE, as after `head`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == "", err
