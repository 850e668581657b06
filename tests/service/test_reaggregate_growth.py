"""Dawid–Skene labels grow with the answers, not with the square of the labels (issue 22's shared task at
5,000 documents: about ten label rows a drawn item after 18 submissions)."""

from __future__ import annotations

import pytest

import unpooled.core.annotation as core_annotation
from unpooled.service.annotation.actions import RELABEL_TOLERANCE, current_labels, reaggregate, request_verification
from unpooled.service.annotation.models import Label
from unpooled.service.crowd.base import SimulatedBackend
from unpooled.service.evaluations.draws import draw

from ..conftest import load_redocred_subset

pytestmark = [pytest.mark.db, pytest.mark.django_db]


def _drifted(real, by):
    """Dawid–Skene whose probabilities of "correct" all move by ``by`` (towards 1/2), as a refit after answers
    about other items moves them."""

    def fit(*a, **kw):
        got = real(*a, **kw)
        got.probas[:] = got.probas + by * (0.5 - got.probas) / abs(0.5 - got.probas).clip(1e-9)
        return got

    return fit


def test_a_refit_appends_a_label_only_where_the_items_label_changed(shared_data, tmp_path, monkeypatch):
    corpus, hwe, _ = load_redocred_subset(shared_data, tmp_path, 10, "regrow")
    request_verification(hwe, sorted(set(draw(hwe, 30, level="instance", rng=1))))
    crowd = SimulatedBackend(accuracy=0.8, seed=1)
    crowd.publish(corpus)
    crowd.collect(corpus)
    assert reaggregate(corpus) > 0
    labels = current_labels(corpus, method="dawid-skene")
    rows = Label.objects.filter(corpus=corpus, method="dawid-skene").count()
    assert reaggregate(corpus) == 0  # nothing new: nothing appended

    real = core_annotation.dawid_skene
    monkeypatch.setattr(core_annotation, "dawid_skene", _drifted(real, RELABEL_TOLERANCE / 2))
    assert reaggregate(corpus) == 0  # every probability moved, within the tolerance: no label again
    flat = [k for k, v in labels.items() if abs(v.probability - 0.5) > 2 * RELABEL_TOLERANCE]
    monkeypatch.setattr(core_annotation, "dawid_skene", _drifted(real, 2 * RELABEL_TOLERANCE))
    assert reaggregate(corpus) >= len(flat) > 0  # past it: labelled again
    now = current_labels(corpus, method="dawid-skene")
    assert all(now[k].pk != labels[k].pk for k in flat)
    assert Label.objects.filter(corpus=corpus, method="dawid-skene").count() >= rows + len(flat)
