"""A lease's token is an MTurk worker's only credential (it is in the task page's path), and the MTurk entry's query
carries the link's signature and Amazon's worker and assignment ids: neither the web server's access log nor the
service's own log (Django logs every 4xx with its path: "Gone: /annotate/task/<token>/") keeps them."""

from __future__ import annotations

import logging
from datetime import timedelta
from types import SimpleNamespace

TOKEN = "Zk3vQ9sLxY2bW7nT5rP1aE8dC4fG6hJ0"
ENTRY = "/annotate/mturk/?task=12&sig=SIGNATURE123&hitId=3HIT&assignmentId=3ASSIGNMENT&workerId=AWORKER77"


def test_the_access_log_keeps_no_lease_token_signature_or_worker_id():
    from gunicorn.config import Config

    from unpooled.service.config.access_log import RedactingLogger
    from unpooled.service.config.server import web_server_command

    cmd = web_server_command("127.0.0.1:8411", 2)
    assert cmd[cmd.index("--logger-class") + 1] == "unpooled.service.config.access_log.RedactingLogger"
    cfg = Config()
    cfg.set("accesslog", "-")
    logger = RedactingLogger(cfg)
    for uri, referer in ((f"/annotate/task/{TOKEN}/", ENTRY), (ENTRY, f"https://u.example/annotate/task/{TOKEN}/")):
        path, _, query = uri.partition("?")
        environ = {"REQUEST_METHOD": "POST", "RAW_URI": uri, "SERVER_PROTOCOL": "HTTP/1.1", "PATH_INFO": path,
                   "QUERY_STRING": query, "HTTP_REFERER": referer, "REMOTE_ADDR": "10.0.0.1"}
        atoms = logger.atoms(SimpleNamespace(status="200 OK", sent=5, headers=[]),
                             SimpleNamespace(headers=[("REFERER", referer)]), environ, timedelta(seconds=1))
        line = cfg.access_log_format % atoms + " ".join(str(v) for v in atoms.values())
        for secret in (TOKEN, "SIGNATURE123", "AWORKER77", "3ASSIGNMENT"):
            assert secret not in line, (secret, line)
        assert "/annotate/" in line and "task=12" in cfg.access_log_format % atoms + str(atoms["f"]) + str(atoms["r"])


def test_the_service_log_keeps_no_lease_token():
    from unpooled.service.config.access_log import RedactFilter

    handlers = [h for h in logging.getLogger().handlers if any(isinstance(f, RedactFilter) for f in h.filters)]
    assert handlers, "the root logger's handler redacts"
    rec = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "Gone: %s", (f"/annotate/task/{TOKEN}/",),
                            None)
    assert handlers[0].filter(rec) and TOKEN not in rec.getMessage() and "Gone: /annotate/task/" in rec.getMessage()
    rec = logging.LogRecord("django.request", logging.WARNING, __file__, 1, "Bad Request: %s", (ENTRY,), None)
    assert handlers[0].filter(rec) and "AWORKER77" not in rec.getMessage() and "SIGNATURE123" not in rec.getMessage()
