"""``unpooled submit --server`` against a hostile or broken server: the token goes to that server only (never
to where it redirects), waits and answers are bounded, and an answer of the wrong shape is an error naming the
server, never a traceback."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from unpooled.cli.commands import submission as submission_cmd
from unpooled.cli.main import main

TOKEN = "secret-token-123"


class Server:
    """A local HTTP server answering every request with ``handler(request) -> (status, headers, body)`` (a body
    that is a generator is sent piece by piece); records each request's path and headers."""

    def __init__(self, handler):
        self.seen: list[tuple[str, str, dict]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                outer.seen.append((self.command, self.path, dict(self.headers)))
                status, headers, body = handler(self)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    for piece in ([body] if isinstance(body, bytes) else body):
                        self.wfile.write(piece)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = _any

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve():
    made = []

    def make(handler):
        made.append(Server(handler))
        return made[-1]

    yield make
    for s in made:
        s.close()


def _json(status, obj):
    return status, {"Content-Type": "application/json"}, json.dumps(obj).encode()


def submit(capsys, tmp_path, server, *extra):
    path = tmp_path / "run.jsonl"
    path.write_text("{}\n")
    code = main(["submit", str(path), "--corpus", "c", "--server", server, "--token", TOKEN, *extra])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert TOKEN not in out + err
    return code, out, err


def test_a_redirect_elsewhere_does_not_carry_the_token(serve, capsys, tmp_path):
    thief = serve(lambda r: _json(200, {"upload": "u1", "state": "queued", "done": False}))
    hostile = serve(lambda r: (302, {"Location": thief.url + "/steal"}, b""))
    submit(capsys, tmp_path, hostile.url)
    assert thief.seen, "the redirect was followed"  # the request went there, but not the token
    assert all(TOKEN not in json.dumps(h) for _, _, h in thief.seen)


def test_urls_the_server_names_elsewhere_get_no_token(serve, capsys, tmp_path):
    thief = serve(lambda r: _json(200, {"done": True, "state": "accepted"}))
    hostile = serve(lambda r: _json(202, {"upload": "u1", "state": "accepted", "done": True, "submission": 3,
                                          "submission_url": thief.url + "/api/submissions/3",
                                          "url": thief.url + "/api/uploads/u1"}))
    submit(capsys, tmp_path, hostile.url)
    submit(capsys, tmp_path, hostile.url, "--wait")
    assert all(TOKEN not in json.dumps(h) for _, _, h in thief.seen)


@pytest.mark.parametrize("answer", [
    {"upload": "u1", "state": "accepted", "done": True},  # no submission, no submission_url
    {"upload": "u1", "state": "accepted", "done": True, "submission": 3, "submission_url": 7, "counts": [1]},
    {"upload": "u1", "state": "rejected", "done": True, "error": "just a string"},
    {"upload": "u1", "state": "rejected", "done": True, "error": {"code": "submission_rejected",
                                                                   "diagnostics": [1, "x", None]}},
    {"upload": "u1", "state": "accepted", "done": True, "submission": 3, "warnings": "many"},
])
def test_answers_of_the_wrong_shape_are_errors(serve, capsys, tmp_path, answer):
    hostile = serve(lambda r: _json(200, answer) if r.command == "POST" else _json(200, {"id": 3, "run": "r"}))
    code, out, err = submit(capsys, tmp_path, hostile.url)
    assert code in (0, 1, 3)


def test_deeply_nested_answer(serve, capsys, tmp_path):
    hostile = serve(lambda r: (200, {"Content-Type": "application/json"}, b"[" * 50_000 + b"]" * 50_000))
    code, _, err = submit(capsys, tmp_path, hostile.url)
    assert code == 3 and "not a JSON answer" in err


def test_an_endless_answer_is_cut_off(serve, capsys, tmp_path):
    def endless():
        while True:
            yield b" " * 65536

    hostile = serve(lambda r: (200, {"Content-Type": "application/json"}, endless()))
    code, _, err = submit(capsys, tmp_path, hostile.url)
    assert code == 3 and "larger than" in err


def test_a_trickling_answer_is_bounded_in_time(serve):
    def trickle():
        while True:
            yield b" "
            time.sleep(0.2)

    hostile = serve(lambda r: (200, {"Content-Type": "application/json"}, trickle()))
    with pytest.raises(submission_cmd.ServerError, match="took longer than"):
        submission_cmd._call("GET", hostile.url + "/api/x", TOKEN, timeout=1.5)
