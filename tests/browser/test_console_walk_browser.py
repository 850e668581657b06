"""The organiser's walk (2026-11-30), in Chromium: the header shows each role only the links it may use."""

from __future__ import annotations

import pytest

from .layout import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]


@pytest.fixture
def people():
    from django.contrib.auth.models import User

    from unpooled.service.accounts.models import Profile, Role
    from unpooled.service.submissions.models import Team

    team = Team.objects.create(name="navteam")
    made = {}
    for name, role, tm in (("sub", Role.SUBMITTER, team), ("loner", Role.SUBMITTER, None),
                           ("anna", Role.ANNOTATOR, None), ("org", Role.ORGANISER, None)):
        u = User.objects.create_user(name, password=f"pw-{name}-12345")
        Profile.objects.create(user=u, role=role, team=tm)
        made[name] = u
    return made


def _nav(page) -> dict[str, str]:
    links = page.locator("header nav a")
    return {links.nth(i).inner_text(): links.nth(i).get_attribute("href") for i in range(links.count())}


@pytest.mark.parametrize("who, shown, hidden", [
    ("sub", {"Submit"}, {"Annotate", "Console"}),
    ("loner", set(), {"Submit", "Annotate", "Console"}),
    ("anna", {"Annotate"}, {"Submit", "Console"}),
    ("org", {"Submit", "Annotate", "Console"}, set()),
])
def test_the_header_links_only_what_the_role_may_use(page, live_server, people, who, shown, hidden):
    sign_in(page, live_server.url, who, f"pw-{who}-12345")
    page.goto(live_server.url + "/")
    nav = _nav(page)
    assert shown <= nav.keys() and not (hidden & nav.keys()), nav
    for name in shown:  # and each one it shows opens for them (an annotator's Submit was a 403)
        resp = page.goto(live_server.url + nav[name])
        assert resp.status == 200, (who, name, resp.status)


def test_anonymous_visitors_see_submit_and_annotate_which_ask_to_sign_in(page, live_server, people):
    page.goto(live_server.url + "/")
    nav = _nav(page)
    assert {"Submit", "Annotate"} <= nav.keys() and "Console" not in nav


def test_the_header_reads_the_role_without_a_query_of_its_own(client, people):
    """The role comes with the session's user (one query, joined with the profile): the header adds none."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(people["anna"])
    with CaptureQueriesContext(connection) as q:
        body = client.get("/").content.decode()
    assert ">Annotate</a>" in body and ">Submit</a>" not in body
    profile_reads = [x["sql"] for x in q.captured_queries if "accounts_profile" in x["sql"]]
    assert len(profile_reads) == 1 and "auth_user" in profile_reads[0], profile_reads


def test_long_names_wrap_at_390_px(page, live_server, world):
    """The demo's run "en_core_web_sm+rules" in a submission page's heading and a Wikipedia document id
    ("University_College_London_Hospitals_NHS_Foundation_Trust") in a document page's line pushed the pages
    sideways at 390 px: such words now break."""
    from unpooled.service.corpora.models import Document
    from unpooled.service.submissions.models import Submission

    from .layout import check_layout

    sub = Submission.objects.get(corpus=world)
    Submission.objects.filter(pk=sub.pk).update(run_id="en_core_web_sm+rules_and_a_longer_name")
    doc = Document.objects.filter(corpus=world).order_by("pk").first()
    Document.objects.filter(pk=doc.pk).update(doc_id="University_College_London_Hospitals_NHS_Foundation_Trust")
    page.goto(f"{live_server.url}/submissions/{sub.pk}/")
    check_layout(page, "submission-long-run-name")
    page.goto(f"{live_server.url}/corpora/{world.name}/documents/{doc.pk}/")
    check_layout(page, "document-long-id")


def test_saving_the_settings_says_what_changed(page, live_server, world, people):
    """Saving the settings said only "saved": neither what changed nor that it applies from now on.  It now names
    each change, old to new, and what it affects; a save that changes nothing says so."""
    sign_in(page, live_server.url, "org", "pw-org-12345")
    page.goto(f"{live_server.url}/organiser/settings/?corpus={world.name}")
    old = page.input_value("#id_reward_verify_cents")
    page.fill("#id_reward_verify_cents", str(int(old) + 2))
    page.fill("#id_budget_cents", "50000")
    with page.expect_navigation():
        page.click("button:has-text('Save settings')")
    said = page.inner_text("main [role=status]")
    assert f"Pay per verification answer (cents): {old} → {int(old) + 2}" in said, said
    assert "Budget for the whole corpus (cents): none → 50000" in said and "tasks created from now on" in said, said
    with page.expect_navigation():
        page.click("button:has-text('Save settings')")
    assert "nothing changed" in page.inner_text("main [role=status]")


def test_the_document_draw_says_its_cost_and_locates_a_bad_value(page, live_server, world, people):
    """Drawing the exhaustive document sample did not say what it costs, and a bad value (more documents than
    the corpus has, a negative seed) came back as one message on top naming every field, with the form reset;
    each error is now at its field, the values typed are kept, and nothing is drawn."""
    from unpooled.service.annotation.actions import settings_for
    from unpooled.service.annotation.models import ExhaustiveDocument

    st = settings_for(world)
    st.answers_per_item, st.reward_entities_cents, st.reward_relations_cents = 3, 260, 225
    st.save()
    sign_in(page, live_server.url, "org", "pw-org-12345")
    page.goto(f"{live_server.url}/organiser/documents/?corpus={world.name}")
    cost = page.inner_text("#sample-cost")
    assert "3 answers at $2.60" in cost and "3 answers at $2.25" in cost and "Each new document costs $14.55" in cost, cost
    page.select_option("#scheme", "uniform")
    page.evaluate("() => document.querySelectorAll('#sample-form input').forEach(e => { e.removeAttribute('min'); e.removeAttribute('max'); })")
    page.fill("#sample_size", "999")
    page.fill("#sample_seed", "-4")
    with page.expect_navigation() as nav:
        page.click("#sample-form button[type=submit]")
    assert nav.value.status == 400
    assert "1..3" in page.inner_text("#sample_size-error") and "999" in page.inner_text("#sample_size-error")
    assert "-4" in page.inner_text("#sample_seed-error") and page.locator("#scheme-error").count() == 0
    assert page.input_value("#sample_size") == "999" and page.input_value("#scheme") == "uniform"
    assert page.get_attribute("#sample_size", "aria-invalid") == "true"
    assert not ExhaustiveDocument.objects.filter(corpus=world).exists()


def test_the_draw_form_offers_the_scheme_already_drawn(page, live_server, world, people):
    """The form offered "seed" first even where the corpus's sample was uniform, a draw refused ("already has a
    sample of another scheme"): it now offers the scheme drawn so far."""
    from unpooled.service.annotation.sampling import sample_documents

    sample_documents(world, "uniform", 2, seed=0)
    sign_in(page, live_server.url, "org", "pw-org-12345")
    page.goto(f"{live_server.url}/organiser/documents/?corpus={world.name}")
    assert page.input_value("#scheme") == "uniform"
