"""Every main page at 390 and 1280 px, signed in as an organiser, a submitter and an annotator in turn (review
defect 14): the document never scrolls sideways (``document.documentElement.scrollWidth`` at most the viewport's
width, + 1 for rounding); wide tables scroll inside their own box; the first link skips to the main content (UX
review #15).  Each page is screenshotted (``UNPOOLED_SCREENSHOTS``, see layout.py) at both widths, to be looked at.  Every overflow is collected before the
test fails, so one run lists them all."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from unpooled.service.annotation import actions, leasing
from unpooled.service.annotation.models import Annotator, Kind, Task
from unpooled.service.corpora.models import Document
from unpooled.service.submissions.models import RelationInstance

from .layout import shots_dir
from .test_board_pages import board, sign_in  # noqa: F401 - the fixture: two scored submissions, alice and org

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.engine_neutral]

WIDTHS = (390, 1280)


def _annotation_work(corpus, sub) -> None:
    """Open tasks of every kind the service has: verify (3 instances of ``sub``), entities (document 3), relations
    (document 4, whose entities another annotator answered) and cross-document clusters."""
    st = actions.settings_for(corpus)
    st.answers_per_item = 1
    st.save()
    ids = list(RelationInstance.objects.filter(submission=sub).order_by("pk").values_list("pk", flat=True))
    actions.request_verification(sub, ids[-3:])
    assert actions.request_exhaustive(corpus, SimpleNamespace(indices=[3, 4], inclusion=[0.25, 0.25], stage=[1, 1],
                                                              scheme="uniform")) == 2
    docs = list(Document.objects.filter(corpus=corpus).order_by("id"))
    other = Annotator.objects.create(backend="inhouse", external_id="other")
    lease = leasing.lease_next(other, kind=Kind.ENTITIES)
    text = lease.task.document.text
    words = text.split(" ")
    a, b = words[0], words[2]
    ia, ib = text.index(a), text.index(b, len(a))
    actions.submit_answer(lease, {"mentions": [{"start": ia, "end": ia + len(a), "type": "MISC", "cluster": 1},
                                               {"start": ib, "end": ib + len(b), "type": "PER", "cluster": 2}]})
    assert Task.objects.filter(kind=Kind.RELATIONS, status=Task.Status.OPEN).exists()
    items = [{"doc": d.doc_id, "document": d.pk, "cluster": 0, "type": "MISC", "start": 0, "end": 6,
              "text": d.text[:6], "context": [0, 60], "before": "", "after": d.text[6:60]} for d in docs[:3]]
    Task.objects.create(corpus=corpus, kind=Kind.CLUSTERS, document=docs[0], key="clusters:layout",
                        payload={"items": items}, answers_needed=1, priority=timezone.now(), guideline_version="2026.11")


def test_every_page_fits_phone_and_desktop(page, live_server, board):  # noqa: F811
    corpus, a, b = board
    _annotation_work(corpus, a)
    User.objects.create_user("ann2", password="pw-ann2-1234")  # no profile, not staff: an annotator
    base, c = live_server.url, corpus.name
    doc = Document.objects.filter(corpus=corpus).order_by("id").first()
    public = [("home", "/"), ("corpus", f"/corpora/{c}/"), ("document", f"/corpora/{c}/documents/{doc.pk}/"),
              ("leaderboard", f"/corpora/{c}/leaderboard/"),
              ("leaderboard-entities", f"/corpora/{c}/leaderboard/entities/"),
              ("about", "/about/numbers/"), ("participate", f"/corpora/{c}/participate/"),
              ("schema", f"/corpora/{c}/schema/"), ("submissions", "/submissions/"),
              ("submission-public", f"/submissions/{b.pk}/"), ("status", f"/submissions/{a.pk}/status/"),
              ("404", "/submissions/999999/")]
    roles = {
        "organiser": ("org", "pw-org-1234", public + [
            ("submission-org", f"/submissions/{a.pk}/"), ("console", "/organiser/"),
            ("console-annotation", f"/organiser/annotation/?corpus={c}"),
            ("console-settings", f"/organiser/settings/?corpus={c}"),
            ("console-submissions", f"/organiser/submissions/?corpus={c}"), ("console-teams", "/organiser/teams/"),
            ("console-periods", f"/organiser/periods/?corpus={c}"), ("console-mturk", f"/organiser/mturk/?corpus={c}"),
            ("invites", "/accounts/invites/"), ("account-organiser", "/accounts/")]),
        "member": ("alice", "pw-alice-1234", public + [
            ("submission-team", f"/submissions/{a.pk}/"), ("upload", "/submissions/new/"),
            ("upload-history", "/submissions/uploads/"), ("account", "/accounts/"),
            ("403-console", "/organiser/")]),
        "annotator": ("ann2", "pw-ann2-1234", [
            ("home", "/"), ("queue", "/annotate/"), ("verify", "/annotate/next/verify/"),
            ("entities", "/annotate/next/entities/"), ("relations", "/annotate/next/relations/"),
            ("clusters", "/annotate/next/clusters/"), ("403-upload", "/submissions/new/")]),
    }
    shots = shots_dir()
    wide, seen = [], []
    for role, (user, pw, pages) in roles.items():
        page.context.clear_cookies()
        sign_in(page, base, user, pw)
        for name, url in pages:
            resp = page.goto(base + url)
            want = 404 if name.startswith("404") else 403 if name.startswith("403") else 200
            assert resp.status == want, (role, name, url, resp.status)
            if name in ("verify", "entities", "relations", "clusters"):
                assert "/annotate/task/" in page.url, (role, name, page.url)  # a task of that kind was open
            # the first link of every page skips the header, to the main content (UX review #15)
            assert page.evaluate("""() => { const a = document.querySelector('a[href], button');
                return a.classList.contains('skip-link') && a.getAttribute('href') === '#main'
                       && document.querySelectorAll('main#main').length === 1; }"""), (role, name)
            for w in WIDTHS:
                page.set_viewport_size({"width": w, "height": 850})
                page.wait_for_timeout(30)
                sw, vw = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
                page.screenshot(path=str(shots / f"all-{role}-{name}-{w}.png"), full_page=True)
                page.screenshot(path=str(shots / f"all-{role}-{name}-{w}-top.png"))  # the first screen, readable
                seen.append((role, name, w))
                if sw > vw + 1:
                    culprits = page.evaluate("""(vw) => [...document.querySelectorAll('body *')]
                        .filter(e => e.getBoundingClientRect().right > vw + 1)
                        .filter(e => !e.parentElement.closest('.scroll, .table-wrap, .table-scroll, pre, table'))
                        .sort((x, y) => y.getBoundingClientRect().right - x.getBoundingClientRect().right)
                        .slice(0, 4).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
                                         + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ').join('.') : '')
                                         + ' ' + Math.round(e.getBoundingClientRect().right))""", vw)
                    wide.append(f"{role} {name} ({url}) at {w} px: {sw} px wide; {culprits}")
            page.set_viewport_size({"width": 1280, "height": 850})
    assert len(seen) == 2 * sum(len(p) for _, _, p in roles.values())
    assert not wide, "pages that scroll sideways:\n" + "\n".join(wide)
