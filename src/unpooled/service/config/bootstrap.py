"""Start the service's Django outside a WSGI server: the CLI, the benchmarks, subprocess tests."""

from __future__ import annotations

import os


def setup_django(*, migrate: bool = True) -> None:
    """Configure Django; apply pending migrations so a fresh data directory just works."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "unpooled.service.config.settings")
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command
        from django.db import connection
        from django.db.migrations.executor import MigrationExecutor

        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            call_command("migrate", verbosity=0, interactive=False)
