"""The command-line reference as Markdown, generated from the ``unpooled`` parser itself.

The documentation site's *Command line* page is this module's output (``tools/mkdocs_hooks.py`` calls
:func:`cli_reference` at build time), so it cannot drift from ``--help``: every command and command group, its
usage line, its arguments with their choices and defaults, and its examples.
"""

from __future__ import annotations

import argparse
import html

#: the width usage lines are wrapped at (fixed, so that the page does not depend on the terminal)
WIDTH = 100


def _subcommands(parser: argparse.ArgumentParser):
    """``(name, help, subparser)`` of each subcommand of ``parser``, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name) or "", sub


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _cell(text: str) -> str:
    """Text for a Markdown table cell: HTML-escaped, pipes escaped, one line."""
    return html.escape(" ".join(str(text).split()), quote=False).replace("|", "\\|")


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=WIDTH)
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                name += " " + formatter._format_args(action, action.dest.upper())
        else:
            name = formatter._format_args(action, action.dest)
        helptext = formatter._expand_help(action) if action.help else ""
        extra = []
        if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
            extra.append("choices: " + ", ".join(f"`{c}`" for c in action.choices))
        if (action.option_strings and action.nargs != 0 and action.default not in (None, "", argparse.SUPPRESS)
                and "default" not in helptext):
            extra.append(f"default: `{action.default}`")
        desc = _cell(helptext) + "".join(f"<br>{e}" for e in extra)
        rows.append(f"| `{_cell(name).replace('`', '')}` | {desc} |")
    return rows


def _section(parser: argparse.ArgumentParser, path: tuple[str, ...], helptext: str, level: int) -> list[str]:
    title = " ".join(("unpooled", *path))
    out = [f"{'#' * level} {title}", ""]
    about = parser.description or helptext
    if about:
        out += [_cell(about), ""]
    out += ["```text", _usage(parser), "```", ""]
    rows = _argument_rows(parser)
    if rows:
        out += ["| argument | meaning |", "|---|---|", *rows, ""]
    subs = list(_subcommands(parser))
    if subs:
        out += ["| command | what it does |", "|---|---|"]
        for name, sub_help, _ in subs:
            anchor = "-".join(("unpooled", *path, name)).replace(" ", "-")
            out.append(f"| [`{' '.join((*path, name))}`](#{anchor}) | {_cell(sub_help)} |")
        out.append("")
    if parser.epilog and parser.epilog.startswith("examples:"):
        lines = [ln.strip() for ln in parser.epilog.splitlines()[1:] if ln.strip()]
        out += ["Examples:", "", "```sh", *lines, "```", ""]
    for name, sub_help, sub in subs:
        out += _section(sub, (*path, name), sub_help, min(level + 1, 4))
    return out


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The Markdown page documenting every command of ``parser`` (default: ``unpooled``'s own)."""
    if parser is None:
        from .main import build_parser

        parser = build_parser()
    head = [
        "# Command line reference",
        "",
        "Generated from the `unpooled` command's own parser when this site was built: it is what "
        "`unpooled COMMAND --help` prints, one section per command.",
        "",
        "Exit status: 0 ok, 1 findings (the file has errors and was rejected), 2 usage error, 3 any other error "
        "(`--traceback` shows the Python traceback). Located problems print as `path:line:col: CODE message` "
        "followed by `help:`; their codes are listed under [Diagnostics](../diagnostics.md).",
        "",
    ]
    body = _section(parser, (), "", 2)
    # the top-level section's title is the program's name; the page's own title stands above it
    return "\n".join(head + body).rstrip() + "\n"
