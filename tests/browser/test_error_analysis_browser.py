"""The error analysis says where its labels came from (UX review 2026-11-26 #5), in Debian's Chromium: labels of a
simulated crowd are said to be a simulated crowd's, reading the corpus's gold layer -- so that a true fact the gold
layer lacks is judged wrong -- with the crowd's real settings (the accuracy the corpus's backend answers with,
the number of simulated annotators behind the labels), and each wrong row names the backend of its answers."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from unpooled.service.annotation import actions
from unpooled.service.annotation.models import Kind, Label
from unpooled.service.evaluations.models import Draw
from unpooled.service.submissions.models import Submission

from .layout import check_layout, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]

MEMBER, MEMBER_PW = "member", "pw-member-1234"


def labelled_by_simulated_crowd(corpus) -> Submission:
    """The world's submission drawn 40 times, its drawn instances verified by 3 simulated annotators as the
    corpus's backend sets them up (3 answers each, majority labels); a member of its team."""
    from unpooled.service.accounts.models import Profile, Role
    from unpooled.service.crowd.base import backend_for
    from unpooled.service.crowd.simulated import SimulatedCrowd
    from unpooled.service.evaluations.draws import draw

    sub = Submission.objects.get(corpus=corpus, is_reference=False)
    st = actions.settings_for(corpus)
    st.answers_per_item = 3
    st.save()
    draw(sub, 40, level="instance", rng=3)
    actions.request_verification(sub, set(Draw.objects.filter(submission=sub).values_list("instance_id", flat=True)))
    SimulatedCrowd.uniform(corpus, 3, accuracy=backend_for(corpus).accuracy, rng=0).run(kinds=[Kind.VERIFY])
    u = User.objects.create_user(MEMBER, password=MEMBER_PW)
    Profile.objects.create(user=u, role=Role.SUBMITTER, team=sub.team)
    return sub


def test_errors_say_the_labels_come_from_a_simulated_crowd_reading_the_gold_layer(page, live_server, world):
    from unpooled.service.crowd.base import backend_for

    sub = labelled_by_simulated_crowd(world)
    assert Label.objects.filter(corpus=world, correct=False).exists()
    sign_in(page, live_server.url, MEMBER, MEMBER_PW)
    page.goto(f"{live_server.url}/submissions/{sub.pk}/#errors")
    page.locator("#errors").scroll_into_view_if_needed()
    check_layout(page, "errors-label-sources", full_page=False)
    intro = page.inner_text("#errors-intro")
    assert "labelled wrong by the annotators" not in intro
    sources = page.inner_text("#label-sources")
    # from the labels' own annotators (3 simulated ones) and the corpus's backend (its accuracy), not a fixed text
    assert "simulated crowd" in sources and "3 simulated annotators" in sources, sources
    assert f"set to answer right with probability {backend_for(world).accuracy:g}" in sources, sources
    assert "gold layer" in sources and "missing from the gold layer is judged wrong" in sources, sources
    cells = page.eval_on_selector_all("#error-table td.label", "tds => tds.map(td => td.textContent)")
    assert cells and all("simulated crowd" in c for c in cells), cells
