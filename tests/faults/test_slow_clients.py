"""Slow clients against the web tier (security review 2026-11-26, N5): six clients sending one header line every 2 s
took every sync gunicorn process of ``unpooled serve`` for 30 s.  The deployment the service documents puts nginx in
front (``deploy/nginx.conf``), which reads each request whole in its event loop before gunicorn sees it.  This test
starts that very file in front of a real ``unpooled serve`` (Debian's nginx; ``./dev test`` installs it) and
repeats the attack with twice as many clients: a reader is served while every slow client is still connected."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from .harness import free_port, http, until

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "nginx.conf"
#: slow clients at once: more than the web processes (2 here, 4 by default on 2 CPUs)
SLOW = 12

pytestmark = [pytest.mark.faults,
              pytest.mark.skipif(not os.access(NGINX, os.X_OK), reason=f"{NGINX} missing (apt-get install nginx-light)")]


class SlowClients:
    """``n`` connections that send a request line and then one header line a second, never finishing the headers,
    until :meth:`stop`; ``cut`` counts those the server closed meanwhile."""

    def __init__(self, port: int, n: int) -> None:
        self.port, self.cut, self._stop = port, 0, threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._one, args=(i,), daemon=True) for i in range(n)]
        for t in self._threads:
            t.start()

    def _one(self, i: int) -> None:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                while not self._stop.wait(1.0):
                    s.sendall(f"X-Slow-{i}: still here\r\n".encode())
        except OSError:
            with self._lock:
                self.cut += 1

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)


def _start_nginx(tmp: Path, listen: int, upstream: int) -> subprocess.Popen:
    site = (CONFIG.read_text().replace("listen 80;", f"listen 127.0.0.1:{listen};")
            .replace("server 127.0.0.1:8000;", f"server 127.0.0.1:{upstream};"))
    assert f"127.0.0.1:{listen}" in site and f"127.0.0.1:{upstream}" in site
    (tmp / "unpooled.conf").write_text(site)
    temps = " ".join(f"{k}_temp_path {tmp / k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (tmp / "nginx.conf").write_text(
        ("user root;\n" if os.geteuid() == 0 else "")
        + f"daemon off;\nworker_processes 1;\npid {tmp / 'nginx.pid'};\nerror_log {tmp / 'error.log'} warn;\n"
        f"events {{ worker_connections 1024; }}\n"
        f"http {{ access_log off; {temps} include {tmp / 'unpooled.conf'}; }}\n")
    proc = subprocess.Popen([NGINX, "-p", str(tmp), "-c", str(tmp / "nginx.conf")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    return proc


def test_behind_the_documented_nginx_slow_clients_hold_no_web_process(serve, sqlite_env, tmp_path):
    svc = serve(sqlite_env, web_workers=2)
    svc.wait_up()
    front = free_port()
    ngx_dir = tmp_path / "nginx"
    ngx_dir.mkdir()
    nginx = _start_nginx(ngx_dir, front, svc.port)
    try:
        proxied = f"http://127.0.0.1:{front}"
        until(lambda: http(proxied + "/api/me", timeout=5)[0] == 200, "nginx to answer",
              context=lambda: (ngx_dir / "error.log").read_text() if (ngx_dir / "error.log").exists() else "")
        # the attack through nginx: a reader is answered while every slow client is still connected
        slow = SlowClients(front, SLOW)
        time.sleep(2.5)  # every slow client has connected and sent its first lines
        status, _ = http(proxied + "/api/me", timeout=60)
        cut_meanwhile = slow.cut
        slow.stop()
        assert status == 200 and cut_meanwhile == 0, (status, cut_meanwhile)
        assert nginx.poll() is None and svc.get("/api/me")[0] == 200
        # bodies: 10 MB on every address (nginx's 413), 2 GB on the two that receive a submission file
        body = b"x" * (11 << 20)
        assert http(proxied + "/accounts/login/", data=body, timeout=60)[0] == 413
        assert http(proxied + "/api/submissions", data=body, timeout=60)[0] == 401  # through, to the view
    finally:
        nginx.terminate()
        try:
            nginx.wait(timeout=20)
        except subprocess.TimeoutExpired:
            nginx.kill()
