"""Entity scores in the service: computed with the evaluation from the verification answers and the exhaustive
layer, stored, shown on the submission page, the API and the leaderboard tab; what cannot be scored says why."""

from __future__ import annotations

import csv
import io

import pytest

from unpooled.cli.main import main
from unpooled.service.evaluations.models import EntityScore

from ..conftest import load_redocred_subset
from .test_annotation_e2e import _system_jsonl

pytestmark = pytest.mark.django_db


def _metrics(es):
    return es.details["metrics"]


@pytest.mark.engine_neutral
def test_redocred_entity_scores_with_intervals_and_no_linking(shared_data, tmp_path, capsys):
    corpus, hwe, path = load_redocred_subset(shared_data, tmp_path, 40, "entc", team="DocRED-original", run="hwe")
    noisy_path = tmp_path / "noisy.jsonl"
    _system_jsonl(path, noisy_path, rng=3, keep=0.4)
    from unpooled.service.submissions.actions import do_ingest_submission

    noisy = do_ingest_submission(noisy_path, "entc", "noisy", "run-1", "jsonl").submission
    code = main(["evaluate", "--corpus", "entc", "--accuracy", "0.9", "--labels", "150", "--documents", "10",
                 "--json"])
    capsys.readouterr()
    assert code == 0
    for sub in (hwe, noisy):
        es = EntityScore.objects.filter(submission=sub).order_by("-id").first()
        assert es is not None and es.documents == 10
        m = _metrics(es)
        with capsys.disabled():
            print("\n", sub, {k: (v["value"], v["lo"], v["hi"], v.get("reason", "")[:30]) for k, v in m.items()},
                  es.details["verification"], es.details["parts"], es.details["argument_share"])
        for k in ("mention_p", "mention_r", "mention_f1", "nil_b3_p", "nil_b3_r", "nil_b3_f1"):
            v = m[k]
            assert v["value"] is not None and 0 <= v["lo"] <= v["value"] <= v["hi"] <= 1, (k, v)
        # the noisy system gives no entity types: typing is not scored, and says why
        if sub == noisy:
            assert m["typing"]["value"] is None and "without entity types" in m["typing"]["reason"]
        else:
            assert m["typing"]["lo"] <= m["typing"]["value"] <= m["typing"]["hi"] and m["typing"]["value"] > 0.9
        for k in ("link_p", "link_r", "link_f1"):
            assert m[k]["value"] is None and "no KB links" in m[k]["reason"]
        # the exhaustive documents' labels come from the simulated crowd's answers, corrected for its rates
        crowd = es.details["crowd"]
        with capsys.disabled():
            print(" crowd", crowd)
        assert crowd["corrected"]["type"] and 0.8 < crowd["c"] <= 1 and 0.8 < crowd["s1"] <= 1
        assert any("corrected for the crowd's errors" in n for n in es.details["notes"])

    # the cross-document clustering task: created once every sampled document's entity layer was final, answered
    # by the simulated crowd from the gold layer, aggregated with agreement figures, feeding the NIL scores
    from unpooled.service.annotation.models import Kind, Task

    ct = Task.objects.get(corpus=corpus, kind=Kind.CLUSTERS)
    assert ct.status == Task.Status.COMPLETE and len(ct.payload["items"]) >= 2
    assert ct.result["answers"] == 3 and 0 <= ct.result["agreement"]["unanimous"] <= 1
    assert sum(len(c) for c in ct.result["clusters"]) == len(ct.payload["items"])
    es = EntityScore.objects.filter(submission=hwe).order_by("-id").first()
    assert es.details["nil_across_documents"] is True
    v = es.details["metrics"]["nil_b3_p"]
    assert v["lo"] <= v["value"] <= v["hi"]

    # the submission page's entity section (its own partial), the API and the leaderboard tab
    from django.test import Client

    from unpooled.service.api.schemas import EntityLeaderboardOut, EntityScoresOut
    from unpooled.service.submissions.models import Submission

    Submission.objects.filter(pk__in=[hwe.pk, noisy.pk]).update(status=Submission.Status.PUBLISHED)
    c = Client()
    html = c.get(f"/submissions/{hwe.pk}/").content.decode()
    assert 'id="entity-table"' in html and "mention precision" in html and 'id="entity-unscored"' in html
    assert 'id="entity-clustering"' in html and "Fleiss κ" in html and "across documents" in html
    assert "no KB links" in html and "linking precision, linking recall, linking F1" in html
    html = c.get(f"/submissions/{noisy.pk}/").content.decode()
    assert "without entity types" in html
    api = c.get(f"/api/submissions/{hwe.pk}/entity-scores").json()
    EntityScoresOut.model_validate(api)
    m = api["entity_score"]["metrics"]
    assert m["link_p"]["value"] is None and m["mention_f1"]["lo"] <= m["mention_f1"]["value"] <= m["mention_f1"]["hi"]
    board = c.get("/api/corpora/entc/leaderboard/entities?metric=mention_p").json()
    EntityLeaderboardOut.model_validate(board)
    assert [r["rank"] is not None for r in board["rows"]] == [True, True]
    assert c.get("/api/corpora/entc/leaderboard/entities?metric=nope").status_code == 400
    board = c.get("/api/corpora/entc/leaderboard/entities?metric=typing").json()
    assert [r["run"] for r in board["rows"] if r["rank"] is None] == ["run-1"]  # no types: last, unranked
    page = c.get("/corpora/entc/leaderboard/entities/?metric=typing").content.decode()
    assert 'id="entity-leaderboard"' in page and "not scored" in page and "<svg" in page
    assert c.get("/corpora/entc/leaderboard/entities/?metric=nope").status_code == 404
    assert 'id="entities-tab"' in c.get("/corpora/entc/leaderboard/").content.decode()
    # the tab's CSV (there was none): the rows and numbers of the board the API gives, in its order
    assert 'href="/corpora/entc/leaderboard/entities.csv?metric=typing"' in page
    got = c.get("/corpora/entc/leaderboard/entities.csv?metric=typing")
    assert got["Content-Type"].startswith("text/csv") and "entc-entities-typing.csv" in got["Content-Disposition"]
    lines = list(csv.DictReader(io.StringIO(got.content.decode())))
    assert [(x["run"], x["rank"], x["ranked_by"]) for x in lines] == [
        (r["run"], "" if r["rank"] is None else str(r["rank"]), "typing") for r in board["rows"]]
    for x, r in zip(lines, board["rows"]):
        for k, v in r["entity_score"]["metrics"].items():
            assert x[k] == ("" if v["value"] is None else repr(v["value"])) and (x[f"{k}_not_scored"] != "") == (
                v["value"] is None)
    assert lines[-1]["typing_not_scored"] and not lines[0]["typing_not_scored"]
    assert c.get("/corpora/entc/leaderboard/entities.csv?metric=nope").status_code == 404
    # a private submission's entity scores are its team's and the organisers'
    Submission.objects.filter(pk=noisy.pk).update(visibility=Submission.Visibility.PRIVATE)
    assert c.get(f"/api/submissions/{noisy.pk}/entity-scores").status_code == 404
    assert "run-1" not in c.get("/corpora/entc/leaderboard/entities/").content.decode()
    assert "run-1" not in c.get("/corpora/entc/leaderboard/entities.csv").content.decode()


# ---------------------------------------------------------------------------- a TAC corpus, with KB links

def tac_world(name: str = "tacent"):
    """The TAC fixture corpus and Cold Start KB, its two documents annotated exhaustively by three annotators
    who give KB links (the corpus has no gold layer: the annotators' layer is the only truth), the drawn
    instances verified, the corpus re-scored; returns (corpus, submission)."""
    from types import SimpleNamespace


    from unpooled.service.annotation import actions, leasing
    from unpooled.service.annotation.models import Annotator, Backend, Kind, Task
    from unpooled.service.corpora.actions import do_load_corpus
    from unpooled.service.corpora.models import Document
    from unpooled.service.evaluations import publish
    from unpooled.service.evaluations.run import evaluate
    from unpooled.service.submissions.actions import do_ingest_submission

    from ..conftest import FIXTURES

    corpus = do_load_corpus(FIXTURES / "kb" / "sources.xml", "tac", name, schema="tac-kbp")
    st = actions.settings_for(corpus)
    st.control_share = 0.0
    st.save()
    sub = do_ingest_submission(FIXTURES / "kb" / "coldstart.kb", name, "team-a", None, "tac").submission
    actions.request_exhaustive(corpus, SimpleNamespace(indices=[0, 1], inclusion=[1.0, 1.0], stage=[1, 1],
                                                       scheme="uniform"))
    nyt = Document.objects.get(corpus=corpus, doc_id="NYT_ENG_20130914.0094")
    df = Document.objects.get(corpus=corpus, doc_id="bolt-eng-DF-170-181103-15978")

    def span(doc, text, after=""):
        start = doc.text.index(after + text) + len(after)
        return start, start + len(text)

    layer = {
        nyt.pk: [("Carrie Fisher", "", "PER", 0, "WIKI:Carrie_Fisher"), ("Beverly Hills", "", "GPE", 1, "WIKI:Beverly_Hills"),
                 ("Debbie Reynolds", "", "PER", 2, "WIKI:Debbie_Reynolds"),
                 ("Fisher", "<P>\n", "PER", 0, "WIKI:Carrie_Fisher"), ("Paul Simon", "", "PER", 3, "WIKI:Paul_Simon"),
                 ("Lucasfilm", "", "ORG", 4, ""), ("Los Angeles", "", "GPE", 5, "WIKI:Los_Angeles")],
        df.pk: [("Debbie Reynolds", "", "PER", 0, "WIKI:Debbie_Reynolds"), ("Thalians", "", "ORG", 1, ""),
                ("Hollywood", "", "GPE", 2, "WIKI:Hollywood")],
    }
    docs = {nyt.pk: nyt, df.pk: df}

    def entities_answer(doc_pk):
        out = []
        for text, after, typ, cluster, link in layer[doc_pk]:
            s, e = span(docs[doc_pk], text, after)
            out.append({"start": s, "end": e, "type": typ, "cluster": cluster, "link": link})
        return {"mentions": out}

    people = [Annotator.objects.create(backend=Backend.SIMULATED, external_id=f"tac-{i}") for i in range(3)]
    for ann in people:
        while (lease := leasing.lease_next(ann, kind=Kind.ENTITIES, corpus=corpus)) is not None:
            actions.submit_answer(lease, entities_answer(lease.task.document_id))
    assert Task.objects.filter(corpus=corpus, kind=Kind.ENTITIES, status=Task.Status.COMPLETE).count() == 2

    evaluate(corpus, crowd=None, labels=30, documents=0)  # draws and verification tasks; nobody answered yet
    valid = {span(nyt, t, a) for t, a, *_ in layer[nyt.pk]} | {span(df, t, a) for t, a, *_ in layer[df.pk]}

    def ok(arg):
        return any(s < arg["end"] and arg["start"] < e for s, e in valid)

    for ann in people:
        while (lease := leasing.lease_next(ann, kind=Kind.VERIFY, corpus=corpus)) is not None:
            p = lease.task.payload
            actions.submit_answer(lease, {"relation": "holds", "subject_ok": ok(p["subject"]),
                                          "object_ok": ok(p["object"]) if p["object"].get("value") is None else True,
                                          "link_ok": None})
    publish.rescore(corpus)
    return corpus, sub


def test_tac_corpus_entity_scores_with_links():
    """Linking is scored on a corpus whose exhaustive layer has links, with the figures computed by hand."""
    from django.test import Client

    from unpooled.service.evaluations.models import EntityScore
    from unpooled.service.submissions.models import Submission

    corpus, sub = tac_world()
    es = EntityScore.objects.filter(submission=sub).order_by("-id").first()
    m = es.details["metrics"]
    # by hand: the KB links 7 distinct mentions (Carrie Fisher's 5, Debbie Reynolds' 2); right: Carrie Fisher,
    # Fisher, Debbie Reynolds twice (the nominal and pronominal ones match no mention of the layer)
    assert m["link_p"]["value"] == pytest.approx(4 / 7)
    # 8 linked mentions in the layer; the KB links 4 of them rightly (Paul Simon, Beverly Hills, ... unlinked)
    assert m["link_r"]["value"] == pytest.approx(4 / 8)
    for k in ("link_p", "link_r", "link_f1", "mention_p", "mention_r", "typing"):
        assert m[k]["lo"] <= m[k]["value"] <= m[k]["hi"], k
    # NIL mentions: Lucasfilm (overlapped by "Lucasfilm & Disney") and the Thalians, each alone: B-cubed 1
    assert m["nil_b3_p"]["value"] == pytest.approx(1.0) and m["nil_b3_r"]["value"] == pytest.approx(1.0)
    Submission.objects.filter(pk=sub.pk).update(status=Submission.Status.PUBLISHED)
    html = Client().get(f"/submissions/{sub.pk}/").content.decode()
    assert 'data-metric="link_p"' in html and "no KB links" not in html

    # the cross-document clustering task on a TAC corpus: its two unlinked entities (Lucasfilm, the Thalians), one
    # per document, answered apart by the three annotators; the NIL figures are then across documents
    from unpooled.service.annotation import actions, leasing
    from unpooled.service.annotation.models import Annotator, Kind, Task
    from unpooled.service.evaluations import publish

    ct = Task.objects.get(corpus=corpus, kind=Kind.CLUSTERS, status=Task.Status.OPEN)
    assert sorted(it["text"] for it in ct.payload["items"]) == ["Lucasfilm", "Thalians"]
    for ann in Annotator.objects.filter(external_id__startswith="tac-"):
        lease = leasing.lease_next(ann, kind=Kind.CLUSTERS, corpus=corpus)
        actions.submit_answer(lease, {"groups": [[0], [1]]})
    ct.refresh_from_db()
    assert ct.status == Task.Status.COMPLETE and ct.result["clusters"] == [[0], [1]]
    assert ct.result["agreement"]["unanimous"] == 1.0
    publish.rescore(corpus)
    es = EntityScore.objects.filter(submission=sub).order_by("-id").first()
    assert es.details["nil_across_documents"] is True
    m = es.details["metrics"]
    assert m["nil_b3_p"]["value"] == pytest.approx(1.0) and m["nil_b3_r"]["value"] == pytest.approx(1.0)
    html = Client().get(f"/submissions/{sub.pk}/").content.decode()
    assert "2 entities in 2 clusters from 3 answers" in html


def test_clustering_task_posts_to_mturk_like_the_others():
    """A clusters task has its own HIT title and adapter default reward (UNPOOLED_MTURK_REWARD_CLUSTERS); publishing
    pays the corpus's reward_clusters_cents (tests/service/test_mturk_clusters.py)."""
    from unpooled.service.crowd.mturk import MTurkConfig
    from unpooled.service.crowd.mturk_sync import TITLES
    from unpooled.service.annotation.models import Kind

    assert Kind.CLUSTERS in TITLES and MTurkConfig().rewards["clusters"] == "1.20"
    assert MTurkConfig.from_env({"UNPOOLED_MTURK_REWARD_CLUSTERS": "0.90"}).rewards["clusters"] == "0.90"


def test_weak_crowd_warning_says_whether_the_labels_were_corrected():
    """The page's warning under a poor crowd: scores from the answers say what the correction assumes; scores
    from the aggregated layer alone (no answers, or rates not identified) say the layer's errors remain."""
    from django.template.loader import render_to_string

    base = {"rows": [], "documents": 3, "weak_crowd": True, "accuracy": 0.74, "notes": [], "unscored": []}
    corrected = render_to_string("web/_submission_entities.html", {"entities": {
        **base, "layer_corrected": True, "crowd": {"s1": 0.917, "c": 0.909}}})
    assert 'id="entity-weak-crowd"' in corrected and "corrected for their error rates" in corrected
    assert "0.92 of the mentions" in corrected and "likely too low" not in corrected
    layer = render_to_string("web/_submission_entities.html", {"entities": {**base, "layer_corrected": False}})
    assert 'id="entity-weak-crowd"' in layer and "likely too low" in layer
    calm = render_to_string("web/_submission_entities.html", {"entities": {**base, "weak_crowd": False}})
    assert 'id="entity-weak-crowd"' not in calm
