"""``/demo/status.json``: how far ``./dev up`` has got loading the demo (polled by the banner's script)."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_GET

from ..demo_progress import public_view, read_progress


@require_GET
def demo_status(request):
    """Public and cheap: a small file of the data directory, no database query; never cached."""
    resp = JsonResponse(public_view(read_progress()))
    resp["Cache-Control"] = "no-store"
    return resp
