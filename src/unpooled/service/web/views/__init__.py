"""Server-rendered pages, one module per concern. Views are thin: fetch, call an action, render."""

from . import demo, explore  # noqa: F401 - demo.demo_status, explore.favicon
from .explore import corpus_detail, document_detail, home, submission_list
from . import participate
from .leaderboard import about_numbers, leaderboard, leaderboard_csv
from .submission import submission_detail, submission_export, submission_settings
from .submit import retry, status, status_json, upload, upload_history, upload_status

__all__ = ["about_numbers", "corpus_detail", "document_detail", "home", "leaderboard", "leaderboard_csv",
           "participate", "submission_detail", "submission_export", "submission_list", "submission_settings",
           "retry", "status", "status_json", "upload", "upload_history", "upload_status"]
