"""Document sampling in the service: the seed scheme end to end (Re-DocRED through the simulated crowd, and a
TAC-format corpus), the estimators reading its inclusion probabilities, and the organiser's analysis page
(who may see it, the cache, the background path for large corpora, bad options)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

from unpooled.core.corpus import detect_format
from unpooled.service.accounts.models import Profile, Role
from unpooled.service.annotation.actions import AnnotationError
from unpooled.service.annotation.models import ExhaustiveDocument, Kind, Task
from unpooled.service.annotation.sampling import annotated_entities, inclusion_by_document, sample_documents
from unpooled.service.corpora.actions import do_load_corpus
from unpooled.service.crowd.simulated import SimulatedCrowd
from unpooled.service.organiser import documents

from ..conftest import FIXTURES, load_redocred_subset

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(shared_data, tmp_path):
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 60, "docsample", team="team-a", run="run-1")
    return corpus, sub


def _login(client, name: str, *, role=None, staff=False) -> User:
    u = User.objects.create_user(name, password=f"pw-{name}-123", is_staff=staff)
    if role is not None:
        Profile.objects.create(user=u, role=role)
    assert client.login(username=name, password=f"pw-{name}-123")
    return u


@pytest.mark.engine_neutral
def test_seed_scheme_end_to_end_on_redocred(world):
    from unpooled.service.evaluations.inputs import exhaustive_truth

    corpus, _ = world
    s1, made = sample_documents(corpus, "seed", 50, seed=2)
    assert made == 10 and set(s1.stage.tolist()) == {1}
    with pytest.raises(AnnotationError, match="stage 1 is not annotated yet: 10 of 10 documents"):
        sample_documents(corpus, "seed", 50, seed=2)
    SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0).run(kinds=[Kind.ENTITIES])
    stage1 = list(ExhaustiveDocument.objects.filter(corpus=corpus, stage=1).values_list("document_id", flat=True))
    names = annotated_entities(corpus, stage1)
    assert names and all(n.strip() for n in names)
    s2, made2 = sample_documents(corpus, "seed", 50, seed=2)
    assert made2 == len(s2) == 40 and s2.scheme == "seed"      # 10 by query entities, 30 defensive
    rows = ExhaustiveDocument.objects.filter(corpus=corpus)
    assert all(r.inclusion == 1.0 and r.scheme == "seed" for r in rows.filter(stage=1))
    inc2 = [r.inclusion for r in rows.filter(stage=2)]
    assert len(inc2) == 40 and all(0 < p <= 1 for p in inc2)
    # the entity part prefers documents mentioning stage-1 entities: they get higher probabilities than the
    # defensive uniform rate of the rest
    assert max(inc2) > min(inc2)
    with pytest.raises(AnnotationError, match="both stages are already drawn"):
        sample_documents(corpus, "seed", 50, seed=2)
    # the recall estimators read these probabilities: every exhaustive true instance carries its document's
    SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=1).run()
    truth, ndocs = exhaustive_truth(corpus)
    inc = inclusion_by_document(corpus)
    assert ndocs == 50 and truth
    assert {t.inclusion for t in truth} <= set(inc.values())
    assert any(t.inclusion < 1 for t in truth)                        # stage-2 documents are weighted by 1/pi


def test_seed_scheme_on_a_tac_corpus():
    path = FIXTURES / "corpus" / "tac"
    corpus = do_load_corpus(path, detect_format(str(path)), "tac-docsample")
    n = corpus.n_documents
    assert n >= 4
    s1, made = sample_documents(corpus, "seed", n, seed=0)
    assert made == len(s1) >= 1
    # stage 1 annotated by hand (TAC has no gold layer for the simulated crowd): one PER entity named by a
    # word every document contains (its markup), and a non-named TITLE mention that must not become a query
    docs = {d.pk: d.text for d in corpus.documents.all()}
    t = Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES).first()
    text = docs[t.document_id]
    word = "doc" if "doc" in text else "DOC"
    start = text.index(word)
    t.result = {"mentions": [{"start": start, "end": start + len(word), "type": "PER", "cluster": 0},
                             {"start": start, "end": start + 1, "type": "TITLE", "cluster": 1}]}
    t.status = Task.Status.COMPLETE
    t.save()
    Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES).exclude(pk=t.pk).update(status=Task.Status.COMPLETE)
    assert annotated_entities(corpus, [t.document_id]) == [word]
    s2, made2 = sample_documents(corpus, "seed", n, seed=0)
    assert made2 == len(s2) == n - len(s1)
    rows = ExhaustiveDocument.objects.filter(corpus=corpus, stage=2)
    assert all(0 < r.inclusion <= 1 for r in rows)
    # the whole corpus is drawn: every probability is 1
    assert all(abs(r.inclusion - 1.0) < 1e-9 for r in rows)


def test_analysis_of_a_tac_corpus_without_gold_layer():
    path = FIXTURES / "corpus" / "tac"
    corpus = do_load_corpus(path, detect_format(str(path)), "tac-analyse")
    got = documents.compute(corpus, dict(documents.DEFAULTS, size=2, draws=1))
    assert got["source"] == "none" and not got["has_relations"] and got["entities"] == 0
    assert set(got["svgs"]) == {"histogram", "clusters", "relations"}


# -- the organiser page -----------------------------------------------------------------------------

def _page(client, corpus, **q):
    return client.get(reverse("organiser:documents"), {"corpus": corpus.name, **q})


@pytest.mark.parametrize("role", [Role.SUBMITTER, Role.ANNOTATOR, None])
def test_page_and_actions_refuse_non_organisers(world, role):
    corpus, _ = world
    c = Client()
    assert _page(c, corpus).status_code == 302                      # anonymous: sign in first
    _login(c, "nobody", role=role)
    assert _page(c, corpus).status_code == 403
    r = c.post(reverse("organiser:documents_sample"), {"corpus": corpus.name, "scheme": "uniform", "sample_size": 3})
    assert r.status_code == 403 and not ExhaustiveDocument.objects.exists()
    r = c.post(reverse("organiser:documents_analyse"), {"corpus": corpus.name})
    assert r.status_code == 403


def test_page_shows_the_figures_and_caches_them(world, monkeypatch):
    corpus, _ = world
    c = Client()
    _login(c, "org", role=Role.ORGANISER)
    calls = []
    real = documents.compute
    monkeypatch.setattr(documents, "compute", lambda *a, **k: calls.append(1) or real(*a, **k))
    r = _page(c, corpus, size=20, draws=2)
    assert r.status_code == 200
    html = r.content.decode()
    for fig in ("fig-histogram", "fig-clusters", "fig-relations"):
        assert f'id="{fig}"' in html
    assert html.count("<svg") == 3 and "seed" in html and "Document sampling" in html
    assert _page(c, corpus, size=20, draws=2).status_code == 200
    assert len(calls) == 1                                            # the second view came from the cache
    # drawing a sample changes what the analysis reads: computed again, with the drawn sample as a row
    r = c.post(reverse("organiser:documents_sample"), {"corpus": corpus.name, "scheme": "seed", "sample_size": 20,
                                                       "sample_seed": 1})
    assert r.status_code == 302 and ExhaustiveDocument.objects.filter(corpus=corpus, scheme="seed").count() == 4
    html = _page(c, corpus, size=20, draws=2).content.decode()
    assert len(calls) == 2 and "drawn sample (seed)" in html


def test_bad_options_and_bad_draws_are_refused_with_the_reason(world):
    corpus, _ = world
    c = Client()
    _login(c, "org", role=Role.ORGANISER)
    r = _page(c, corpus, size=10 ** 9)
    assert r.status_code == 400 and "size: expected 1..60, got 1000000000" in r.content.decode()
    r = _page(c, corpus, draws="many")
    assert r.status_code == 400 and "draws: expected a whole number, got" in r.content.decode()
    r = c.post(reverse("organiser:documents_sample"), {"corpus": corpus.name, "scheme": "magic", "sample_size": 3},
               follow=True)
    assert r.status_code == 400 and 'id="scheme-error">expected one of uniform, two-stage, tfidf, seed, ' \
        "got &#x27;magic&#x27;" in r.content.decode()
    assert not ExhaustiveDocument.objects.exists()
    c.post(reverse("organiser:documents_sample"), {"corpus": corpus.name, "scheme": "uniform", "sample_size": 3})
    r = c.post(reverse("organiser:documents_sample"), {"corpus": corpus.name, "scheme": "seed", "sample_size": 5},
               follow=True)
    assert "already has a 3-document sample of another scheme" in r.content.decode()


@override_settings(TASKS={"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}})
def test_large_corpus_is_analysed_in_the_background_once(world, monkeypatch):
    corpus, _ = world
    monkeypatch.setattr(documents, "INLINE_DOCUMENTS", 10)
    c = Client()
    _login(c, "org", role=Role.ORGANISER)
    html = _page(c, corpus, size=20, draws=1).content.decode()
    assert 'id="analysis-missing"' in html and "<svg" not in html      # nothing heavy ran in the request
    started = []
    real = documents.request_analysis
    monkeypatch.setattr(documents, "request_analysis", lambda *a: started.append(real(*a)) or started[-1])
    r = c.post(reverse("organiser:documents_analyse"), {"corpus": corpus.name, "size": 20, "draws": 1, "seed": 0},
               follow=True)
    assert started == [True] and "analysis of docsample started" in r.content.decode()
    assert r.content.decode().count("<svg") == 3                      # the immediate task backend ran it
    r = c.post(reverse("organiser:documents_analyse"), {"corpus": corpus.name, "size": 20, "draws": 1, "seed": 0},
               follow=True)
    assert started == [True, False] and "done or already running" in r.content.decode()


def test_few_documents_draw_with_a_warning_and_the_page_says_so(world):
    """Samples below FEW_DOCUMENTS are drawn (small corpora need them) but the page warns: recall's 90% intervals
    of 10 uniform documents were 27 points wide in `unpooled simulate documents`."""
    from unpooled.core.sampling import FEW_DOCUMENTS
    from unpooled.core.sampling.documents import COVERAGE_BELOW

    corpus, _ = world
    c = Client()
    _login(c, "org", role=Role.ORGANISER)
    html = _page(c, corpus, size=20, draws=1).content.decode()
    assert 'id="few-documents"' in html
    for scheme, least in FEW_DOCUMENTS.items():
        docs, pooled = COVERAGE_BELOW[scheme][:2]
        assert f"{least} documents for {scheme} (with {docs}: {pooled:.1%}," in html
    r = c.post(reverse("organiser:documents_sample"), {"corpus": corpus.name, "scheme": "uniform", "sample_size": 12},
               follow=True)
    html = r.content.decode()
    assert ExhaustiveDocument.objects.filter(corpus=corpus).count() == 12
    assert "12 documents (uniform) are few for recall" in html and f"sample at least {FEW_DOCUMENTS['uniform']}" in html


def test_enough_documents_draw_without_the_warning(world):
    from unpooled.core.sampling import FEW_DOCUMENTS

    corpus, _ = world
    c = Client()
    _login(c, "org", role=Role.ORGANISER)
    r = c.post(reverse("organiser:documents_sample"), {"corpus": corpus.name, "scheme": "uniform",
                                                       "sample_size": FEW_DOCUMENTS["uniform"]}, follow=True)
    assert ExhaustiveDocument.objects.filter(corpus=corpus).count() == FEW_DOCUMENTS["uniform"]
    assert "are few for recall" not in r.content.decode()


def test_the_console_warns_of_a_small_exhaustive_sample_planned_or_drawn(world):
    """The default plan (40) is above the measured minimum; a smaller plan, then a smaller sample drawn, is an alert
    on every console page (with a link to where it is changed); a plan of the whole corpus or of nothing is not."""
    from unpooled.core.sampling import FEW_DOCUMENTS
    from unpooled.service.annotation.actions import settings_for
    from unpooled.service.annotation.models import AnnotationSettings
    from unpooled.service.organiser import console

    corpus, _ = world
    assert AnnotationSettings._meta.get_field("exhaustive_documents").default == 40 >= FEW_DOCUMENTS["uniform"]

    def few():
        return [a for a in console.alerts(corpus) if a.code == "few_exhaustive_documents"]

    st = settings_for(corpus)
    assert st.exhaustive_documents == 40 and few() == []
    st.exhaustive_documents = 0  # recall from exhaustive documents switched off: nothing planned
    st.save()
    assert few() == []
    st.exhaustive_documents = 500  # more than the corpus: the lifecycle takes all 60, recall is exact
    st.save()
    assert few() == []
    st.exhaustive_documents = FEW_DOCUMENTS["uniform"]
    st.save()
    assert few() == []
    st.exhaustive_documents = 12
    st.save()
    (a,) = few()
    assert a.level == "warning" and a.section == "settings"
    assert a.message.startswith("the planned exhaustive sample: 12 documents (uniform) are few for recall")
    c = Client()
    _login(c, "org", role=Role.ORGANISER)
    html = c.get(reverse("organiser:home") + f"?corpus={corpus.name}").content.decode()
    assert 'data-code="few_exhaustive_documents"' in html
    sample_documents(corpus, "seed", 30)  # stage 1 of the seed scheme: 6 documents drawn
    (a,) = few()
    assert a.section == "documents" and a.message.startswith("6 documents (seed) are few for recall")
    html = c.get(reverse("organiser:home") + f"?corpus={corpus.name}").content.decode()
    assert reverse("organiser:documents") + f"?corpus={corpus.name}" in html.split('data-code="few_exhaustive')[1]
