"""An in-house annotator logs in and completes each task type with the keyboard in Chromium;
the answers are stored. Also prints the task pages' load times."""

from __future__ import annotations

import json
import statistics

import pytest
from django.contrib.auth.models import User

from unpooled.service.annotation import actions
from unpooled.service.annotation.models import Answer, Kind, Task
from unpooled.service.submissions.models import RelationInstance

from ..conftest import load_redocred_subset

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(shared_data, tmp_path):
    corpus, sub, _ = load_redocred_subset(shared_data, tmp_path, 3, "browser", team="zz-hidden-team", run="zz-hidden-run")
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))[:6]
    actions.request_verification(sub, ids)
    User.objects.create_user("ann", password="pw-ann-123")
    return corpus


def login(page, base):
    page.goto(f"{base}/accounts/login/?next=/annotate/")
    page.fill("#id_username", "ann")
    page.fill("#id_password", "pw-ann-123")
    page.press("#id_password", "Enter")
    page.wait_for_url(f"{base}/annotate/")


def load_times(page) -> tuple[float, float]:
    nav = page.evaluate("JSON.stringify(performance.getEntriesByType('navigation')[0])")
    nav = json.loads(nav)
    return nav["domContentLoadedEventEnd"], nav["loadEventEnd"]


def test_verify_with_the_keyboard(page, live_server, world):
    base = live_server.url
    login(page, base)
    page.keyboard.press("1")                       # first task type on the queue page: verify
    page.wait_for_selector("#task[data-kind=verify]")
    assert "zz-hidden" not in page.content()
    first = page.url
    page.wait_for_timeout(300)                     # a human takes a moment: seconds > 0
    page.keyboard.press("1")                       # holds
    page.keyboard.press("o")                       # the object mention is not valid
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_selector("#task[data-kind=verify]")
    assert page.url != first
    token = first.rstrip("/").split("/")[-1]
    ans = Answer.objects.get(assignment__token=token)
    assert ans.value == {"relation": "holds", "subject_ok": True, "object_ok": False, "link_ok": None}
    assert ans.correct is False and ans.seconds > 0
    second = page.url
    page.keyboard.press("3")                       # no relation
    with page.expect_navigation():
        page.keyboard.press("Enter")
    ans2 = Answer.objects.get(assignment__token=second.rstrip("/").split("/")[-1])
    assert ans2.value["relation"] == "none" and ans2.correct is False

    times = []
    for _ in range(5):
        page.goto(page.url)
        times.append(load_times(page))
    print(f"\nverify page load (ms): DOMContentLoaded median {statistics.median(t[0] for t in times):.0f}, "
          f"load median {statistics.median(t[1] for t in times):.0f}")
    assert max(t[1] for t in times) < 5000


def test_entities_then_relations_with_the_keyboard(page, live_server, world):
    from unpooled.core.sampling import sample_uniform

    corpus = world
    st = actions.settings_for(corpus)
    st.answers_per_item = 1
    st.save()
    actions.request_exhaustive(corpus, sample_uniform(corpus.n_documents, 1, rng=0))
    ent = Task.objects.get(kind=Kind.ENTITIES)
    ent.answers_needed = 1
    ent.save()
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/annotate/next/entities/")
    page.wait_for_selector("#task[data-kind=entities]")
    types = json.loads(page.get_attribute("#doc", "data-types"))
    per, loc = str(types.index("PER") + 1), str(types.index("LOC") + 1)
    toks = page.eval_on_selector_all(".tok", "els => els.map(e => [Number(e.dataset.s), Number(e.dataset.e)])")
    kb = page.keyboard
    kb.press(per)                 # token 0 -> PER, cursor moves to token 1
    kb.press(per)                 # token 1 -> PER, cursor 2
    kb.press("[")                 # back to the mention at token 1
    kb.press("g")                 # ... joins the previous mention's group
    kb.press("ArrowRight")        # cursor 2
    kb.press("Shift+ArrowRight")  # select tokens 2-3
    kb.press(loc)                 # -> LOC
    kb.press(per)                 # token 4 -> PER (a mistake)
    kb.press("[")                 # back to it
    kb.press("Backspace")         # removed
    page.once("dialog", lambda d: d.accept("Q90"))
    kb.press("[")                 # the LOC mention
    kb.press("k")                 # its KB link
    assert "3 mentions in 2 group(s)" in page.inner_text("#summary")
    with page.expect_navigation():
        kb.press("Enter")
    ent.refresh_from_db()
    ans = Answer.objects.get(task=ent)
    got = [(m["start"], m["end"], m["type"]) for m in ans.value["mentions"]]
    assert got == [(toks[0][0], toks[0][1], "PER"), (toks[1][0], toks[1][1], "PER"), (toks[2][0], toks[3][1], "LOC")]
    assert [m["link"] for m in ans.value["mentions"]] == ["", "", "Q90"]
    clusters = [m["cluster"] for m in ans.value["mentions"]]
    assert clusters[0] == clusters[1] != clusters[2]
    assert ent.status == Task.Status.COMPLETE

    rel = Task.objects.get(kind=Kind.RELATIONS)
    assert rel.payload["pairs"] == [[0, 2]]       # one pair: the PER group and the LOC, same sentence
    page.goto(f"{base}/annotate/next/relations/")
    page.wait_for_selector("#task[data-kind=relations]")
    assert "zz-hidden" not in page.content()
    name, desc = json.loads(page.get_attribute("#pairs", "data-relations"))[0]
    kb.press("/")
    kb.type(f"A → B: {desc} ({name})")
    kb.press("Enter")
    kb.press("Escape")
    kb.press("x")                 # cleared
    kb.press("/")
    kb.type(f"B → A: {desc} ({name})")
    kb.press("Enter")
    kb.press("Escape")
    assert page.inner_text(".pair.current .chips").startswith("B → A")
    with page.expect_navigation():
        kb.press("Control+Enter")
    rel.refresh_from_db()
    assert Answer.objects.get(task=rel).value == {"pairs": {"0": [f"ba:{name}"]}}
    assert rel.status == Task.Status.COMPLETE and rel.result["relations"] == [[2, name, 0]]

    # page load times of the entity and relation pages (a fresh lease of each kind)
    ent2 = Task.objects.create(corpus=corpus, kind=Kind.ENTITIES, document=ent.document, key="again",
                               payload={}, answers_needed=1, priority=ent.priority, guideline_version="x")
    rel2 = Task.objects.create(corpus=corpus, kind=Kind.RELATIONS, document=rel.document, key="again",
                               payload=rel.payload, answers_needed=1, priority=rel.priority, guideline_version="x")
    for kind in ("entities", "relations"):
        page.goto(f"{base}/annotate/next/{kind}/")
        times = []
        for _ in range(5):
            page.goto(page.url)
            times.append(load_times(page))
        print(f"\n{kind} page load (ms): DOMContentLoaded median {statistics.median(t[0] for t in times):.0f}, "
              f"load median {statistics.median(t[1] for t in times):.0f}")
        assert max(t[1] for t in times) < 5000
    assert ent2.pk and rel2.pk
