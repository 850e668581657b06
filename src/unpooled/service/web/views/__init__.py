"""Server-rendered pages, one module per concern. Views are thin: fetch, call an action, render."""

from . import demo  # noqa: F401 - demo.demo_status
from .explore import corpus_detail, document_detail, home, submission_list
from . import participate
from .leaderboard import leaderboard
from .submission import submission_detail, submission_export
from .submit import retry, status, status_json, upload, upload_status

__all__ = ["participate", "corpus_detail", "document_detail", "home", "leaderboard", "submission_detail", "submission_export",
           "submission_list", "retry", "status", "status_json", "upload", "upload_status"]
