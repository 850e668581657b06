"""An undefined figure (null in the API: precision and F1 of a submission no labelled draw weighs, joint.py
``precision_linear``) reads "n/a" on the submission page's headline and the live status page; they printed an empty
figure with an empty interval ("–", "[, ]")."""

from __future__ import annotations

import pytest
from django.urls import reverse

from unpooled.service.evaluations.models import Score
from unpooled.service.submissions.models import Submission

from .test_submission_page import make_world

pytestmark = pytest.mark.django_db


def test_an_undefined_precision_reads_n_a(shared_data, tmp_path, client):
    corpus, a, b = make_world(shared_data, tmp_path)
    Submission.objects.filter(pk=a.pk).update(status=Submission.Status.PUBLISHED)
    Score.objects.filter(submission=a, level="instance").update(p=None, p_lo=None, p_hi=None, f1=None, f1_lo=None,
                                                                f1_hi=None)
    html = client.get(reverse("web:submission", args=[a.pk]) + "?level=instance").content.decode()
    head = html.split('id="headline"')[1].split('id="sample-figures"')[0]
    assert head.count('<div class="v">n/a</div>') == 2 and '<div class="v"></div>' not in head
    assert '<div class="muted">–</div>' not in head  # no bare dash between two empty bounds
    status = client.get(reverse("web:status", args=[a.pk])).content.decode()
    row = status.split('<tr data-level="instance">')[1].split("</tr>")[0]
    assert row.count('<td class="num">n/a</td>') == 2 and "[, ]" not in row
