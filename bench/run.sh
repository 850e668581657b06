#!/usr/bin/env bash
# Run every benchmark on SQLite and, when it answers, on PostgreSQL; print the figures as JSON lines.
set -euo pipefail
cd "$(dirname "$0")/.."
UNPOOLED=.venv/bin/unpooled
LINES="${LINES:-1000000}"
env -u DATABASE_URL "$UNPOOLED" bench ingest --lines "$LINES" --json
env -u DATABASE_URL "$UNPOOLED" bench rescore --json
env -u DATABASE_URL "$UNPOOLED" bench pages --json
PG="${UNPOOLED_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
if pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  DATABASE_URL="$PG" "$UNPOOLED" bench ingest --lines "$LINES" --json
  DATABASE_URL="$PG" "$UNPOOLED" bench rescore --json
  DATABASE_URL="$PG" "$UNPOOLED" bench pages --json
fi
