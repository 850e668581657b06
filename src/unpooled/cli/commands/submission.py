"""``unpooled submit`` and ``unpooled submission list|export``."""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlencode, urlsplit
from urllib.request import HTTPRedirectHandler, Request, build_opener

from unpooled.core import json_text
from unpooled.core.errors import file_problem
from unpooled.core.names import KB_FORMATS

from ..main import CommandError, Exit, number, setup_django


def register(sub) -> None:
    p = sub.add_parser(
        "submit", help="validate and store a submission (atomically), here or on a server",
        description="Without --server: validate FILE and store it in the local database for --team. With "
                    "--server URL --token T: upload FILE to a running service's REST API, for the token's team.")
    p.add_argument("file", help="the submission: a TAC KB file or JSONL instances (.gz also)")
    p.add_argument("--corpus", required=True, help="the stored corpus the run is on (see corpus list)")
    p.add_argument("--team", help="the team (required without --server; with --server, organisers only: the "
                                  "token's team is used otherwise)")
    p.add_argument("--run", help="run name (default: the TAC run id line, else the file name)")
    p.add_argument("--format", choices=KB_FORMATS, help="detected when omitted")
    p.add_argument("--private", action="store_true", help="only the team and the organisers see the submission")
    p.add_argument("--description", default="", help="a note shown with the submission")
    p.add_argument("--server", metavar="URL", help="the service, e.g. http://localhost:8000 (its API is URL/api/)")
    p.add_argument("--token", metavar="T", help="the team's API token (default: $UNPOOLED_TOKEN)")
    p.add_argument("--wait", action="store_true", help="with --server: wait until the file is validated and "
                                                      "print the outcome (diagnostics of a rejected file)")
    p.add_argument("--timeout", type=number(1, 86_400), default=600.0, metavar="SECONDS",
                   help="with --wait: give up waiting after this long (default 600)")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.set_defaults(func=cmd_submit)

    s = sub.add_parser("submission", help="list and export stored submissions")
    ss = s.add_subparsers(dest="submission_command", metavar="ACTION")
    ss.required = True
    ls = ss.add_parser("list", help="list stored submissions: stage and latest scores")
    ls.add_argument("--corpus", help="only this corpus's submissions")
    ls.add_argument("--level", choices=("instance", "relation", "entity"), default="instance",
                    help="the level whose scores are shown (default: instance)")
    ls.add_argument("--json", action="store_true", help="print the submissions as JSON (with every level's scores)")
    ls.set_defaults(func=cmd_list)
    ex = ss.add_parser("export", help="write a stored submission back as a file")
    ex.add_argument("id", type=int, help="the submission's id (see submission list)")
    ex.add_argument("--format", choices=KB_FORMATS, required=True, help="the file format to write")
    ex.add_argument("-o", "--output", help="output file (default: standard output)")
    ex.set_defaults(func=cmd_export)


def cmd_submit(args) -> int:
    if args.server:
        return submit_to_server(args)
    if not args.team:
        print("unpooled submit: error: --team is required (or submit to a service with --server URL --token T)",
              file=sys.stderr)
        return Exit.USAGE
    if problem := file_problem(args.file):
        raise CommandError(f"{args.file}: {problem}")
    setup_django()
    from unpooled.service.submissions.actions import do_ingest_submission

    res = do_ingest_submission(args.file, args.corpus, args.team, args.run, args.format,
                               visibility="private" if args.private else "public", description=args.description)
    if args.json:
        print(json.dumps(res.to_dict()))
        return Exit.OK if res.ok else Exit.FINDINGS
    if not res.ok:
        res.report.write_text(sys.stdout)
        print("submission rejected: nothing was stored", file=sys.stderr)
        return Exit.FINDINGS
    sub = res.submission
    if res.duplicate_of is not None:
        print(f"already submitted: this file is submission {sub.pk} ({sub.team.name}/{sub.run_id}); nothing new stored")
        return Exit.OK
    if res.report.n_warnings:
        res.report.write_text(sys.stdout, limit=20)
    c = sub.counts
    print(f"submission {sub.pk}: {sub.team.name}/{sub.run_id} on {sub.corpus.name}: {c.get('instances', 0):,} instances, "
          f"{c.get('entities', 0):,} entities, {c.get('mentions', 0):,} mentions, "
          f"{res.report.n_warnings} warning(s)")
    return Exit.OK


def _row(s) -> dict:
    return {"id": s.pk, "corpus": s.corpus.name, "team": s.team.name, "run": s.run_id, "format": s.format,
            "status": s.status, "stage": s.get_status_display(), "visibility": s.visibility,
            "created": s.created.isoformat(), "counts": s.counts, "scores": {}}


def latest_scores(ids) -> dict[int, dict[str, dict]]:
    """Per submission and level, its latest score: ``{p, p_lo, p_hi, r, ..., f1_hi, draws, estimator}``."""
    from unpooled.service.evaluations.models import Score

    fields = ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi", "draws", "estimator")
    out: dict[int, dict[str, dict]] = {}
    rows = (Score.objects.filter(submission_id__in=list(ids)).order_by("submission_id", "level", "-created", "-id")
            .values_list("submission_id", "level", *fields))
    for sid, level, *vals in rows.iterator(chunk_size=2000):
        out.setdefault(sid, {}).setdefault(level, dict(zip(fields, vals)))
    return out


def _pm(v, lo, hi) -> str:
    """``0.958 [0.908, 1.000]``: the estimate and its interval, as the pages, the leaderboard and ``evaluate``
    print them (a Wilson interval is not symmetric: a ``±`` would misstate one end); ``-`` when there is none."""
    if v is None:
        return "-"
    if lo is None or hi is None:
        return f"{v:.3f}"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def cmd_list(args) -> int:
    setup_django()
    from unpooled.service.submissions.models import Submission

    qs = Submission.objects.select_related("corpus", "team").order_by("pk")
    if args.corpus:
        from unpooled.service.corpora.actions import get_corpus

        qs = qs.filter(corpus=get_corpus(args.corpus))  # an unknown corpus is an error that lists the stored ones
    subs = list(qs)
    scores = latest_scores(s.pk for s in subs)
    rows = [dict(_row(s), scores=scores.get(s.pk, {})) for s in subs]
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no submissions" + (f" on {args.corpus}" if args.corpus else "") + " yet (unpooled submit FILE "
              "--corpus NAME --team TEAM stores one)")
        return 0
    lv = args.level
    table = [("ID", "CORPUS", "TEAM/RUN", "INSTANCES", "STAGE", f"P ({lv})", f"R ({lv})", f"F1 ({lv})")]
    for r in rows:
        sc = r["scores"].get(lv) or {}
        table.append((str(r["id"]), r["corpus"], f"{r['team']}/{r['run']}", f"{r['counts'].get('instances', 0):,}",
                      r["stage"] + (" (private)" if r["visibility"] == "private" else ""),
                      _pm(sc.get("p"), sc.get("p_lo"), sc.get("p_hi")), _pm(sc.get("r"), sc.get("r_lo"), sc.get("r_hi")),
                      _pm(sc.get("f1"), sc.get("f1_lo"), sc.get("f1_hi"))))
    widths = [min(44, max(len(row[i]) for row in table)) for i in range(len(table[0]))]
    right = {0, 3, 5, 6, 7}
    for row in table:
        cells = [(c if len(c) <= widths[i] else c[:widths[i] - 1] + "…") for i, c in enumerate(row)]
        print("  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip())
    print(f"scores: the latest estimate at the {lv} level with its 90% interval "
          "(--level for another; --json for all)")
    return 0


def cmd_export(args) -> int:
    setup_django()
    from unpooled.service.submissions.actions import export_submission, get_submission

    sub = get_submission(args.id)
    if args.output:
        with open(args.output, "w", encoding="utf-8", newline="\n") as out:
            n = export_submission(sub, args.format, out)
        print(f"wrote {n:,} lines to {args.output}", file=sys.stderr)
    else:
        export_submission(sub, args.format, sys.stdout)
    return 0


# ---------------------------------------------------------------------------- submitting to a server

class ServerError(CommandError):
    """The service refused or could not be reached (exit status 3)."""


def _api_base(server: str) -> str:
    """``http://host:8000`` or ``http://host:8000/api`` -> ``http://host:8000/api``."""
    base = server.strip().rstrip("/")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CommandError(f"--server: expected a URL like http://localhost:8000, got {server!r}")
    return base if base.endswith("/api") else base + "/api"


class MultipartFile:
    """A ``multipart/form-data`` body read in blocks: the fields, then the file streamed from disk.

    ``len()`` is the exact body size (sent as Content-Length), so the file is never held in memory.
    """

    def __init__(self, fields: dict[str, str], file_field: str, path: str | Path, file_name: str) -> None:
        self.boundary = f"unpooled-{uuid.uuid4().hex}"
        head = b"".join(
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n'.encode() + v.encode() + b"\r\n"
            for k, v in fields.items())
        safe = file_name.replace('"', "%22").replace("\r", "").replace("\n", "")
        head += (f'--{self.boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{safe}"\r\n'
                 "Content-Type: application/octet-stream\r\n\r\n").encode()
        self._parts: list = [head, Path(path), f"\r\n--{self.boundary}--\r\n".encode()]
        self._size = len(head) + Path(path).stat().st_size + len(self._parts[2])
        self._fh = None
        self._i = self._off = 0

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def __len__(self) -> int:
        return self._size

    def read(self, n: int = -1) -> bytes:
        out = bytearray()
        while self._i < len(self._parts) and (n < 0 or len(out) < n):
            part = self._parts[self._i]
            want = -1 if n < 0 else n - len(out)
            if isinstance(part, Path):
                if self._fh is None:
                    self._fh = open(part, "rb")
                chunk = self._fh.read(want)
                if chunk:
                    out += chunk
                else:
                    self._fh.close()
                    self._i += 1
            else:
                stop = len(part) if want < 0 else min(len(part), self._off + want)
                out += part[self._off:stop]
                self._off = stop
                if self._off >= len(part):
                    self._i, self._off = self._i + 1, 0
        return bytes(out)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


#: the largest answer read from a server (its answers are a few kB; a rejected file's diagnostics stay far below)
MAX_ANSWER_BYTES = 16 * 1024 * 1024


def _origin(url: str) -> tuple[str, str]:
    p = urlsplit(url)
    return p.scheme.lower(), p.netloc.lower()


def _on_server(url, base: str) -> str | None:
    """``url`` when it is a URL of the server at ``base`` (the token goes to that server only), else None."""
    return url if isinstance(url, str) and _origin(url) == _origin(base) else None


class _SameOriginRedirects(HTTPRedirectHandler):
    """Redirects are followed, but the token only to the origin it was sent to: urllib copies every header of
    the request, the token's too, to wherever the server redirects."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and _origin(new.full_url) != _origin(req.full_url):
            new.headers.pop("Authorization", None)
        return new


_OPENER = build_opener(_SameOriginRedirects)


def _read_answer(resp, url: str, deadline: float, timeout: float) -> bytes:
    """The answer's body: at most :data:`MAX_ANSWER_BYTES`, read within ``timeout`` seconds in all (the socket's
    timeout bounds each read only, so a server sending a byte at a time could hold the CLI forever)."""
    if getattr(resp, "fp", True) is None:
        return b""
    read = getattr(resp, "read1", resp.read)
    out = bytearray()
    while chunk := read(65536):
        out += chunk
        if len(out) > MAX_ANSWER_BYTES:
            raise ServerError(f"{url}: the answer is larger than {MAX_ANSWER_BYTES:,} bytes (is this an unpooled "
                              "server?)")
        if time.monotonic() > deadline:
            raise ServerError(f"{url}: the answer took longer than {timeout:g} s")
    return bytes(out)


def _call(method: str, url: str, token: str, *, body=None, content_type: str | None = None,
          timeout: float = 300.0) -> tuple[int, dict]:
    """One API call; returns (HTTP status, JSON body). Errors the server explains come back as a status
    and its ``{code, message, diagnostics}``; an unreachable server raises :class:`ServerError`."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json",
               "User-Agent": "unpooled-cli"}
    if content_type:
        headers["Content-Type"] = content_type
    if body is not None:
        headers["Content-Length"] = str(len(body))
    req = Request(url, data=body, headers=headers, method=method)
    deadline = time.monotonic() + timeout
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            status, raw = resp.status, _read_answer(resp, url, deadline, timeout)
    except HTTPError as exc:
        status, raw = exc.code, _read_answer(exc, url, deadline, timeout)
    except URLError as exc:
        reason = exc.reason
        if body is not None and isinstance(reason, (BrokenPipeError, ConnectionResetError)):
            raise ServerError(f"{url}: the server closed the connection while the file was being sent (is it larger "
                              "than the server accepts?)") from None
        text = getattr(reason, "strerror", None) or str(reason)
        raise ServerError(f"cannot reach {url}: {str(text).lower()}") from None
    except (ConnectionError, TimeoutError) as exc:
        what = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)).lower()
        raise ServerError(f"cannot reach {url}: {what}") from None
    try:
        data = json_text.loads(raw.decode("utf-8")) if raw else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        snippet = raw[:200].decode("utf-8", "replace").strip()
        raise ServerError(f"{url}: HTTP {status}, not a JSON answer (is this an unpooled server?): "
                          f"{snippet!r}") from None
    if not isinstance(data, dict):
        raise ServerError(f"{url}: HTTP {status}, unexpected answer: {str(data)[:200]!r}")
    return status, data


def _print_diagnostics(diags: list[dict], local_path: str, out) -> None:
    from unpooled.core.diagnostics import Diagnostic

    name = Path(local_path).name
    for d in (diags if isinstance(diags, list) else ()):
        if not isinstance(d, dict):
            continue
        fields = {k: (_count(d.get(k)) if k in ("line", "col") else str(d.get(k, v)))
                  for k, v in (("path", ""), ("line", 0), ("code", ""), ("message", ""), ("severity", "error"),
                               ("col", 0), ("field", ""), ("text", ""), ("help", ""))}
        if fields["path"] == name:
            fields["path"] = local_path  # the file as the user named it, so editors can jump to the line
        out.write(Diagnostic(**fields).format() + "\n")


def _refused(args, err: dict, status: int | None = None) -> int:
    """Print the server's error; 1 for a rejected file, else raise (exit 3)."""
    if not isinstance(err, dict):
        err = {"message": str(err)[:500]}
    code, message = err.get("code", "error"), err.get("message", f"HTTP {status}")
    diags = err.get("diagnostics") or []
    if args.json:
        print(json.dumps({"ok": False, "http_status": status, **err}))
        return Exit.FINDINGS if code == "submission_rejected" else Exit.ERROR
    if code == "submission_rejected":
        _print_diagnostics(diags, args.file, sys.stdout)
        print(message)
        return Exit.FINDINGS
    _print_diagnostics(diags, args.file, sys.stderr)
    raise ServerError(f"{message} ({f'HTTP {status} ' if status else ''}{code})")


def submit_to_server(args) -> int:
    """``unpooled submit FILE --server URL --token T``: upload through the REST API."""
    token = args.token or os.environ.get("UNPOOLED_TOKEN", "")
    if not token:
        print("unpooled submit: error: --server needs --token T (or $UNPOOLED_TOKEN): a team's API token, made "
              "on the account page of the service", file=sys.stderr)
        return Exit.USAGE
    path = Path(args.file)
    if problem := file_problem(path):
        raise CommandError(f"{args.file}: {problem}")
    base = _api_base(args.server)
    fields = {"corpus": args.corpus, "run": args.run or "", "format": args.format or "",
              "visibility": "private" if args.private else "public", "description": args.description or ""}
    if args.team:
        fields["team"] = args.team
    body = MultipartFile(fields, "file", path, path.name)
    try:
        status, data = _call("POST", f"{base}/submissions", token, body=body, content_type=body.content_type)
    finally:
        body.close()
    if status >= 400:
        return _refused(args, data, status)
    if args.wait and not data.get("done"):
        data = _wait_upload(base, token, data, args.timeout)
    err = data.get("error")
    if err:
        return _refused(args, err)
    sub_id, warnings = data.get("submission"), data.get("warnings") or []
    if data.get("state") == "accepted" and not isinstance(sub_id, int):
        raise ServerError(f"{base}: an accepted upload without a submission id (is this an unpooled server?)")
    if not isinstance(warnings, list):
        warnings = []
    if data.get("state") != "accepted":
        if args.json:
            print(json.dumps({"ok": True, **data}))
        else:
            print(f"upload {data.get('upload')}: {data.get('state', 'queued')} for validation")
            print(f"follow it: {_site(base)}/submissions/uploads/{quote(str(data.get('upload')))}/")
        return Exit.OK
    sub = {}
    st, detail = _call("GET", _on_server(data.get("submission_url"), base) or f"{base}/submissions/{sub_id}",
                       token)
    if st == 200:
        sub = detail
    if args.json:
        print(json.dumps({"ok": True, **data, "submission_detail": sub or None}))
        return Exit.OK
    _print_diagnostics(warnings, args.file, sys.stdout)
    c = data.get("counts") if isinstance(data.get("counts"), dict) else {}
    run = f"{sub.get('team', data.get('team'))}/{sub.get('run')}" if sub else data.get("team")
    if data.get("duplicate"):
        print(f"already submitted: this file is submission {sub_id} ({run}); nothing new stored")
    else:
        print(f"submission {sub_id}: {run} on {data.get('corpus')}: {_count(c.get('instances')):,} instances, "
              f"{_count(c.get('entities')):,} entities, {_count(c.get('mentions')):,} mentions, "
              f"{len(warnings)} warning(s)")
    if sub:
        print(f"stage: {sub.get('status')}")
    site = _site(base)
    print(f"page: {site}/submissions/{sub_id}/")
    print(f"live status: {site}/submissions/{sub_id}/status/")
    return Exit.OK


def _count(v) -> int:
    """A count from a server's answer (0 unless an integer)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _site(api_base: str) -> str:
    """The web pages' root of a service whose API is ``api_base`` (``http://host:8000/api``)."""
    return api_base.removesuffix("/api")


def _wait_upload(base: str, token: str, data: dict, timeout: float) -> dict:
    """Poll the upload until validated (long-polling the server up to 30 s a time)."""
    url = _on_server(data.get("url"), base) or f"{base}/uploads/{quote(str(data.get('upload')))}"
    end = time.monotonic() + timeout
    while not data.get("done"):
        left = end - time.monotonic()
        if left <= 0:
            raise ServerError(f"upload {data.get('upload')} is still {data.get('state')} after {timeout:g} s; "
                              f"see {url}")
        st, data_ = _call("GET", f"{url}?{urlencode({'wait': max(1, min(30, int(left)))})}", token,
                          timeout=min(30, left) + 30)
        if st >= 400:
            raise ServerError(f"{data_.get('message', f'HTTP {st}')} (HTTP {st} {data_.get('code', 'error')})")
        data = data_
    return data
