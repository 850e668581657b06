"""One submission, one level, one set of numbers: the leaderboard page and its CSV, the submission page (headline,
scores table and the breakdown's "all" row), the submission's scores CSV, the API (leaderboard and scores) and the
CLI (``unpooled submission list``) give the same P, R, F1 and 90% interval, read back from what each one prints."""

from __future__ import annotations

import csv
import io
import re
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.urls import reverse

from unpooled.cli.main import main
from unpooled.service.submissions.models import Submission

from .test_submission_page import make_world

pytestmark = pytest.mark.django_db
KEYS = ("p", "p_lo", "p_hi", "r", "r_lo", "r_hi", "f1", "f1_lo", "f1_hi")
LEVELS = ("instance", "relation")
# an estimate and its interval as the pages print them: 0.499<span class="ci">0.389–0.610</span>
CELL = re.compile(r'(\d\.\d{3})(?:</strong>)?<span class="ci">(\d\.\d{3})–(\d\.\d{3})</span>')


def r3(x) -> str:
    """A float as the pages round it (Django's floatformat: half up on the decimal value)."""
    return str(Decimal(repr(float(x))).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def from_record(rec) -> tuple[str, ...]:
    return tuple(r3(rec[k]) for k in KEYS)


def cells(html: str) -> tuple[str, ...]:
    got = CELL.findall(html)
    assert len(got) >= 3, html[:2000]
    return tuple(x for triple in got[:3] for x in triple)


def test_every_surface_gives_the_same_numbers(shared_data, tmp_path, client, capsys):
    corpus, a, b = make_world(shared_data, tmp_path)
    Submission.objects.filter(pk__in=[a.pk, b.pk]).update(status=Submission.Status.PUBLISHED)
    seen: dict[str, dict[str, tuple]] = {lv: {} for lv in LEVELS}
    for lv in LEVELS:
        # the leaderboard page: the submission's row
        html = client.get(reverse("web:leaderboard", args=[corpus.name]) + f"?level={lv}").content.decode()
        row = html.split(f'data-submission="{a.pk}"')[1].split("</tr>")[0]
        seen[lv]["leaderboard page"] = cells(row)
        # the leaderboard's CSV
        text = client.get(reverse("web:leaderboard_csv", args=[corpus.name]) + f"?level={lv}").content.decode()
        rec = next(r for r in csv.DictReader(io.StringIO(text)) if r["submission"] == str(a.pk))
        seen[lv]["leaderboard CSV"] = from_record(rec)
        # the submission page: the headline, the scores table's row, the breakdown's "all" row
        html = client.get(reverse("web:submission", args=[a.pk]) + f"?level={lv}").content.decode()
        head = html.split('id="headline"')[1].split('id="sample-figures"')[0]
        got = re.findall(r'<div class="v">(\d\.\d{3})</div><div class="muted">(\d\.\d{3})–(\d\.\d{3})</div>', head)
        seen[lv]["submission headline"] = tuple(x for t in got for x in t)
        seen[lv]["submission scores table"] = cells(html.split(f'<tr data-level="{lv}">')[1].split("</tr>")[0])
        seen[lv]["breakdown 'all' row"] = cells(html.split('data-group="all"')[1].split("</tr>")[0])
        # the submission's scores CSV: the newest score of the level
        text = client.get(reverse("web:submission_scores", args=[a.pk, "csv"])).content.decode()
        recs = [r for r in csv.DictReader(io.StringIO(text)) if r["level"] == lv]
        seen[lv]["scores CSV"] = from_record(max(recs, key=lambda r: int(r["id"])))
        # the API: the leaderboard and the submission's scores
        board = client.get(f"/api/corpora/{corpus.name}/leaderboard?level={lv}").json()
        seen[lv]["API leaderboard"] = from_record(next(r for r in board["rows"] if r["submission"] == a.pk)["score"])
        seen[lv]["API scores"] = from_record(client.get(f"/api/submissions/{a.pk}/scores").json()["scores"][lv])
        # the CLI
        assert main(["submission", "list", "--corpus", corpus.name, "--level", lv]) == 0
        out = capsys.readouterr().out
        line = next(x for x in out.splitlines() if x.split()[0] == str(a.pk))
        got = re.findall(r"(\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\]", line)
        seen[lv]["CLI submission list"] = tuple(x for t in got for x in t)
    for lv in LEVELS:
        first = seen[lv]["API scores"]
        assert len(first) == 9
        assert {k: v for k, v in seen[lv].items() if v != first} == {}, (lv, "API scores", first)
    assert seen["instance"]["API scores"] != seen["relation"]["API scores"]
