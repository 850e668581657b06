"""The documentation's examples, run against the real package as a user would run them, so that they cannot drift.

What counts as an example (the convention the pages follow):

* every fenced ``python`` block runs as it stands (no name left for the reader to define);
* the format examples are fed to the real readers: the TAC and JSONL blocks of ``formats/submissions.md`` through
  ``unpooled validate``, the three indented JSON lines of ``formats/offline.md`` through ``unpooled score``;
* every ``unpooled COMMAND [SUBCOMMAND] ...`` a page shows (in code, inline or fenced) names a command of the
  parser, options it has and, for ``--option a|b|c``, exactly its choices; ``reference/commands.md`` lists every
  command;
* the endpoint table of ``reference/api-overview.md`` and the OpenAPI schema the service serves list the same
  operations and query parameters; the diagnostics table of ``diagnostics.md`` lists the codes of the registry.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from unpooled.cli.main import build_parser, main

from ..conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md", ROOT / "SECURITY.md"]
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")


def fenced_blocks(page: Path, lang: str | None = None) -> list[tuple[str, int]]:
    """The fenced blocks of a page (indented ones too, dedented), with the line each starts on."""
    blocks, body, start, indent, kind = [], None, 0, "", ""
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(line)
        if body is None and fence:
            body, start, indent, kind = [], n + 1, fence.group(1), fence.group(2)
        elif body is not None and fence and fence.group(1) == indent:
            if lang is None or kind == lang:
                blocks.append(("\n".join(body) + "\n", start))
            body = None
        elif body is not None:
            body.append(line[len(indent):] if line.startswith(indent) else line)
    return blocks


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- python ---------------------------------------------------------------------------------------------------


PYTHON = [(page, start, code) for page in PAGES for code, start in fenced_blocks(page, "python")]


def test_the_pages_have_python_examples():
    assert any(page.name == "library.md" for page, _, _ in PYTHON)


@pytest.mark.parametrize("page,start,code", PYTHON, ids=[f"{p.relative_to(ROOT)}:{s}" for p, s, _ in PYTHON])
def test_python_block_runs(page, start, code):
    exec(compile(code, f"{page.relative_to(ROOT)}:{start}", "exec"), {"__name__": "docs_example"})


# -- submission files -----------------------------------------------------------------------------------------


SUBMISSIONS = DOCS / "formats" / "submissions.md"


def test_tac_example_is_accepted(capsys, tmp_path):
    (block, _), = [b for b in fenced_blocks(SUBMISSIONS, "") if b[0].startswith("my_run\n")]
    kb = tmp_path / "example.kb"
    kb.write_text(block, encoding="utf-8")
    code, out, _ = run(capsys, "validate", kb, "--corpus", FIXTURES / "kb" / "sources.xml", "--corpus-format", "tac",
                       "--schema", "tac-kbp", "--json")
    report = json.loads(out)
    assert (code, report["errors"], report["warnings"]) == (0, [], [])
    assert report["counts"]["instances"] == block.count("\tper:")


def corpus_for(instance: dict, tmp_path: Path) -> Path:
    """A one-document JSONL corpus long enough for the instance's spans, each span a word of its own."""
    spans = [instance["subject"], instance["object"], *instance.get("provenance", [])]
    text = [" "] * (max(s["end"] for s in spans) + 10)
    for s in (instance["subject"], instance["object"]):
        text[s["start"]:s["end"]] = "A" * (s["end"] - s["start"])
    text[-1] = "."
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"id": instance["doc"], "text": "".join(text)}) + "\n", encoding="utf-8")
    return path


def test_jsonl_example_is_accepted_and_read_as_tac_is_up113(capsys, tmp_path):
    (block, _), = fenced_blocks(SUBMISSIONS, "json")
    run_file = tmp_path / "run.jsonl"
    run_file.write_text(block, encoding="utf-8")
    corpus = corpus_for(json.loads(block), tmp_path)
    offline = ("--corpus", corpus, "--corpus-format", "jsonl", "--schema", "tac-kbp")
    code, out, _ = run(capsys, "validate", run_file, *offline, "--json")
    report = json.loads(out)
    assert (code, report["errors"], report["warnings"], report["counts"]["instances"]) == (0, [], [], 1)
    # diagnostics.md and commands.md quote the message of a JSONL file read as TAC
    code, out, _ = run(capsys, "validate", run_file, *offline, "--format", "tac")
    assert code == 1
    assert "UP113 this file looks like JSONL (one JSON object a line), but it was read as a TAC KB" in out


def test_a_schema_file_of_your_own_has_the_shape_schema_show_prints(capsys, tmp_path):
    """formats/corpora.md: `unpooled schema show NAME --json` prints one; a schema file of your own has that shape."""
    code, out, _ = run(capsys, "schema", "show", "tac-kbp", "--json")
    own = tmp_path / "own.json"
    own.write_text(out, encoding="utf-8")
    assert code == 0 and run(capsys, "schema", "show", own)[0] == 0
    kb = tmp_path / "example.kb"
    kb.write_text([b for b, _ in fenced_blocks(SUBMISSIONS, "") if b.startswith("my_run\n")][0], encoding="utf-8")
    code, out, _ = run(capsys, "validate", kb, "--corpus", FIXTURES / "kb" / "sources.xml", "--corpus-format", "tac",
                       "--schema", own, "--json")
    assert (code, json.loads(out)["errors"]) == (0, [])


# -- offline scoring ------------------------------------------------------------------------------------------


def test_offline_examples_score(capsys, tmp_path):
    page = (DOCS / "formats" / "offline.md").read_text(encoding="utf-8")
    lines = [line[4:] for line in page.splitlines() if line.startswith("    {")]
    submission, label, exhaustive = (json.loads(line) for line in lines)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / f"{label['system']}.jsonl").write_text(json.dumps(submission) + "\n", encoding="utf-8")
    (tmp_path / "L.jsonl").write_text(json.dumps(label) + "\n", encoding="utf-8")
    (tmp_path / "E.jsonl").write_text(json.dumps(exhaustive) + "\n", encoding="utf-8")
    code, out, _ = run(capsys, "score", "--labels", tmp_path / "L.jsonl", "--submissions", tmp_path / "runs",
                       "--exhaustive", tmp_path / "E.jsonl", "--json")
    (row,) = json.loads(out)
    assert code == 0
    assert (row["system"], row["labels"], row["p"], row["recall_protocol"]) == (label["system"], 1, 1.0, "sentence")
    # the same draw by the instance key the page shows for it
    key = json.loads("{%s}" % re.search(r'`("key": "[^`]*")`', page).group(1))["key"]
    (tmp_path / "L.jsonl").write_text(json.dumps({"system": label["system"], "key": key, "label": 1}) + "\n")
    code, by_key, _ = run(capsys, "score", "--labels", tmp_path / "L.jsonl", "--submissions", tmp_path / "runs",
                          "--exhaustive", tmp_path / "E.jsonl", "--json")
    assert (code, json.loads(by_key)) == (0, [row])


# -- the command line -----------------------------------------------------------------------------------------


def subcommands(parser) -> dict:
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            return action.choices
    return {}


def leaf_commands(parser=None, path=()) -> dict[tuple[str, ...], object]:
    parser = parser or build_parser()
    subs = subcommands(parser)
    if not subs:
        return {path: parser}
    return {k: v for name, sub in subs.items() for k, v in leaf_commands(sub, path + (name,)).items()}


def shown_command_lines() -> list[tuple[str, str]]:
    """Every ``unpooled WORD ...`` the pages show, continuation lines joined, up to a comment or the code's end."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        text = re.sub(r"\\\n\s*", " ", text)  # a shell line continued
        text = re.sub(r"\n\s+(\[--)", r" \1", text)  # a synopsis continued on an indented line
        for m in re.finditer(r"unpooled ([a-z][a-z-]*(?: [a-z][a-z-]*)?[^`\n|#]*)", text):
            found.append((str(page.relative_to(ROOT)), m.group(1)))
    return found


def command_of(words: str):
    """The parser of the command the words name, or None for prose (``unpooled is ...``)."""
    head = words.split()
    commands = subcommands(build_parser())
    if head[0] not in commands:
        return None
    parser = commands[head[0]]
    subs = subcommands(parser)
    if subs and len(head) > 1 and re.fullmatch(r"[a-z][a-z-]*", head[1]):
        assert head[1] in subs, f"'unpooled {words}': {head[0]} has no subcommand {head[1]!r}"
        return subs[head[1]]
    return parser


def same_value(shown: str, default) -> bool:
    """``1,000`` is 1000; ``500,5000`` is that list."""
    try:
        return default is not None and float(shown.replace(",", "")) == float(default)
    except ValueError:
        return str(default) == shown


def test_every_command_line_of_the_pages_names_real_options_and_choices():
    checked, wrong = 0, []
    for page, words in shown_command_lines():
        parser = command_of(words)
        if parser is None:
            continue
        checked += 1
        actions = {o: a for a in parser._actions for o in a.option_strings}
        for option in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", words):
            if option not in actions:
                wrong.append(f"{page}: 'unpooled {words.strip()}': no option {option}")
        for option, values in re.findall(r"(--[a-z][a-z-]*) ([\w-]+(?:\|[\w-]+)+)", words):
            choices = getattr(actions.get(option), "choices", None)
            if choices is not None and set(values.split("|")) != set(choices):
                wrong.append(f"{page}: 'unpooled {words.strip()}': {option} takes {sorted(choices)}, not {values}")
        for option, value in re.findall(r"\[(--?[a-z][a-z-]*) ([0-9][0-9.,]*)\]", words):  # "[--sample 150]": the default
            default = getattr(actions.get(option), "default", None)
            if option in actions and not same_value(value, default):
                wrong.append(f"{page}: 'unpooled {words.strip()}': {option} defaults to {default!r}, not {value}")
    assert checked > 100
    assert not wrong, "\n".join(wrong)


def test_commands_at_a_glance_lists_every_command():
    (block, _), = fenced_blocks(DOCS / "reference" / "commands.md", "sh")
    shown = set(re.findall(r"unpooled ([a-z-]+(?: [a-z|-]+)?)", block))
    listed = {(first,) + tuple(rest.split("|")) for first, _, rest in (s.partition(" ") for s in shown)}
    missing = [" ".join(path) for path in leaf_commands()
               if not any(path[0] == entry[0] and (len(path) == 1 or path[1] in entry[1:]) for entry in listed)]
    assert not missing, f"reference/commands.md lists no line for: {missing}"


def test_every_help_describes_each_option_and_ends_with_examples():
    """commands.md: "Every command's --help describes each option and ends with examples"."""
    for path, parser in leaf_commands().items():
        assert "\nexamples:\n" in parser.format_help(), path
        for action in parser._actions:
            assert action.help, (path, action.option_strings or action.dest)


def test_every_help_example_parses(capsys):
    """The examples that end each --help (and that the generated command line reference shows) name real options
    with valid values: each parses with the parser it documents."""
    parsed = 0
    for path, parser in leaf_commands().items():
        for line in parser.format_help().split("\nexamples:\n", 1)[1].splitlines():
            if "unpooled " not in line:
                continue
            command = re.split(r"\s{2,}\(|\s+#", line[line.index("unpooled "):])[0]
            try:
                build_parser().parse_args(shlex.split(command)[1:])
            except SystemExit:
                pytest.fail(f"unpooled {' '.join(path)} --help: {command!r} does not parse: {capsys.readouterr().err}")
            parsed += 1
    assert parsed >= len(leaf_commands())


def test_usage_error_exits_2(capsys):
    """commands.md and diagnostics.md: exit status 2 for a usage error."""
    with pytest.raises(SystemExit) as exc:
        main(["validate"])
    assert exc.value.code == 2
    assert "usage: unpooled validate" in capsys.readouterr().err


# -- diagnostics ----------------------------------------------------------------------------------------------


def test_diagnostics_table_lists_the_registry():
    from unpooled.core.diagnostics import CODES, WARNING

    page = (DOCS / "diagnostics.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"\| (UP\d{3}) \| ([^|]+?) \|", page))
    assert set(rows) == set(CODES)
    for code, problem in rows.items():
        assert ("(warning)" in problem) == (CODES[code][0] == WARNING), code


# -- the REST API ---------------------------------------------------------------------------------------------


def documented_operations() -> dict[tuple[str, str], set[str]]:
    """(method, path with ``{}`` placeholders) -> query parameters, from the endpoint table of api-overview.md; a
    ``…/x`` path continues the cell's last full path from its segment ``x``, and takes the last method named."""
    page = (DOCS / "reference" / "api-overview.md").read_text(encoding="utf-8")
    table = page.split("## Endpoints", 1)[1].split("\n## ", 1)[0]
    ops: dict[tuple[str, str], set[str]] = {}
    for row in table.splitlines()[4:]:
        methods, pending, last = ["GET"], [], ""
        for token in re.findall(r"`([^`]+)`", row):
            m = re.fullmatch(r"(?:(GET|POST|PATCH|PUT|DELETE) ?)?((?:/api|…)/\S*)?", token)
            if not m:
                continue
            if not m.group(2):  # "`GET`, `PATCH /api/...`": both methods of the path that follows
                pending.append(m.group(1))
                continue
            if m.group(1):
                methods, pending = pending + [m.group(1)], []
            path, _, query = m.group(2).partition("?")
            if path.startswith("…"):
                head = path[2:].split("/", 1)[0]
                path = last[:last.index(f"/{head}")] + path[1:]
            else:
                last = path
            for method in methods:
                key = (method, re.sub(r"\{[^}]+\}", "{}", path))
                ops.setdefault(key, set()).update(re.findall(r"(\w+)=", query))
    return ops


def test_api_overview_lists_the_served_operations_and_their_query_parameters():
    from unpooled.service.api.api import api

    schema = api.get_openapi_schema()
    served = {(method.upper(), re.sub(r"\{[^}]+\}", "{}", path)): {p["name"] for p in op.get("parameters", [])
                                                                   if p["in"] == "query"}
              for path, item in schema["paths"].items() for method, op in item.items()}
    documented = documented_operations()
    assert sorted(set(documented) - set(served)) == [], "documented, not served"
    assert sorted(set(served) - set(documented)) == [], "served, not in the endpoint table"
    wrong = {op: sorted(params - served[op]) for op, params in documented.items() if params - served[op]}
    assert not wrong, f"query parameters the schema does not have: {wrong}"
    page = (DOCS / "reference" / "api-overview.md").read_text(encoding="utf-8")
    fields = re.search(r"\(multipart: ([^)]*)\)", page).group(1)
    body = schema["paths"]["/api/submissions"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert set(re.findall(r"`(\w+)`", fields)) == set(body["properties"])


# -- names of the code ----------------------------------------------------------------------------------------


def resolves(dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attribute in parts[i:]:
            if not hasattr(obj, attribute):
                return False
            obj = getattr(obj, attribute)
        return True
    return False


def test_the_modules_names_and_files_the_pages_name_exist():
    """`unpooled.core.estimators.breakdown`, `tests/core/test_offline.py`, `evaluations/scoring.py`: what a page
    names in code exists (a file path may be relative to the package or its service, core or web folder)."""
    roots = [ROOT, ROOT / "src" / "unpooled", ROOT / "src" / "unpooled" / "service", ROOT / "src" / "unpooled" / "core",
             ROOT / "src" / "unpooled" / "service" / "web"]
    wrong = []
    for page in PAGES:
        for name in re.findall(r"`([^`\s]+)`", page.read_text(encoding="utf-8")):
            if re.fullmatch(r"unpooled(\.[A-Za-z_]\w*)+", name) and not resolves(name):
                wrong.append(f"{page.relative_to(ROOT)}: {name}")
            elif re.fullmatch(r"[\w.-]+(/[\w.-]+)+\.(py|js|toml|conf|yml)", name) and \
                    not any((root / name).is_file() for root in roots):
                wrong.append(f"{page.relative_to(ROOT)}: {name}")
            elif re.fullmatch(r"[\w/]*test_\w+\.py::test_\w+", name):
                file, test = name.split("::")
                if not any(re.search(rf"^def {test}\(", path.read_text(encoding="utf-8"), re.M)
                           for path in (ROOT / "tests").rglob(Path(file).name)):
                    wrong.append(f"{page.relative_to(ROOT)}: {name}")
    assert not wrong, "\n".join(wrong)


def test_api_overview_names_every_state_of_an_upload():
    import typing

    from unpooled.service.api.schemas import UploadOut

    page = (DOCS / "reference" / "api-overview.md").read_text(encoding="utf-8")
    (row,) = [line for line in page.splitlines() if line.startswith("| `GET /api/uploads/")]
    states = typing.get_args(UploadOut.model_fields["state"].annotation)
    assert [s for s in states if f"`{s}`" not in row] == []


def test_api_overview_names_every_field_a_patch_changes():
    from unpooled.service.api.schemas import SubmissionPatch

    page = (DOCS / "reference" / "api-overview.md").read_text(encoding="utf-8")
    (row,) = [line for line in page.splitlines() if "`PATCH /api/submissions/" in line]
    assert [f for f in SubmissionPatch.model_fields if f"`{f}`" not in row.split("change", 1)[1]] == []


def test_api_overview_names_every_error_code_with_its_status():
    from unpooled.service.api.errors import ERRORS

    page = (DOCS / "reference" / "api-overview.md").read_text(encoding="utf-8")
    errors = page.split("## Errors", 1)[1].split("\n## ", 1)[0]
    said, status = {}, None
    for number, code in re.findall(r"\b([1-5]\d\d) (?=`)|`([a-z_]+)`", errors):  # "409 `duplicate_run` ... or `conflict`"
        status = int(number) if number else status
        if code in ERRORS:
            said.setdefault(code, status)
    assert {code: status for code, (status, _) in ERRORS.items()} == {c: s for c, s in said.items() if c in ERRORS}


def test_every_list_is_paginated_as_the_overview_says_but_the_periods():
    """api-overview.md: lists take limit and offset and answer count, next, previous and items; a corpus's periods
    come whole."""
    from unpooled.service.api.api import api

    schema = api.get_openapi_schema()
    shapes = schema["components"]["schemas"]
    whole = []
    for path, item in schema["paths"].items():
        get = item.get("get")
        ok = {str(status): answer for status, answer in (get or {}).get("responses", {}).items()}.get("200", {})
        ref = ok.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "")
        fields = set(shapes.get(ref.rsplit("/", 1)[-1], {}).get("properties", {}))
        if "items" not in fields:
            continue
        params = {p["name"] for p in get.get("parameters", [])}
        if {"limit", "offset"} <= params:
            assert {"count", "next", "previous"} <= fields, path
        else:
            whole.append(path)
    assert whole == ["/api/corpora/{name}/periods"]
    page = (DOCS / "reference" / "api-overview.md").read_text(encoding="utf-8")
    assert "except a\ncorpus's periods, which come whole" in page
