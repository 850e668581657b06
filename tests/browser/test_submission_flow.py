"""The whole service, as people use it, in Debian's Chromium against a real ``unpooled serve`` (gunicorn and a
django-tasks-db worker in their own processes, SQLite in a temporary data directory):

a submitter signs up (making a team) → uploads a KB through the form → watches the status page →
an in-house annotator signs up and verifies the sampled instances with the keyboard → the status page turns
to "published" by itself → the leaderboard shows the new row with intervals.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.browser]

SETUP = r"""
import json, sys
from unpooled.service.config.bootstrap import setup_django
setup_django()
from unpooled.service.annotation import actions
from unpooled.service.annotation.models import Backend
from unpooled.service.annotation.sampling import sample_documents
from unpooled.service.corpora.actions import do_load_corpus
from unpooled.service.crowd.simulated import SimulatedCrowd

corpus = do_load_corpus(sys.argv[1], "docred", "flow")
st = actions.settings_for(corpus)
# the organiser's choices: in-house annotators who may sign up without an invite, one answer per item, small samples
st.backend, st.answers_per_item, st.levels, st.open_signup = Backend.INHOUSE, 1, "instance", True
st.min_draws, st.max_draws, st.exhaustive_documents = 6, 6, 3
st.save()
# the corpus already has its exhaustive documents annotated (by an earlier crowd)
sample_documents(corpus, "uniform", 3, seed=0)
SimulatedCrowd.uniform(corpus, 3, accuracy=1.0, rng=0).run()
print(json.dumps({"documents": corpus.n_documents}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(shared_data, tmp_path):
    """``unpooled serve`` on a free port with a fresh data directory holding a 6-document Re-DocRED corpus."""
    docs = json.loads((shared_data / "redocred" / "dev_revised.json").read_text())[:6]
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps(docs))
    # the submission: the original DocRED labels of those documents, as JSONL
    from unpooled.core.corpus import iter_documents
    from unpooled.core.kb.docred import docred_to_jsonl

    kb = tmp_path / "docred-original.jsonl"
    with open(kb, "w") as out:
        docred_to_jsonl(iter_documents(corpus, "docred"), out)
    env = dict(os.environ, UNPOOLED_DATA_DIR=str(tmp_path / "data"), UNPOOLED_RESCORE_DELAY="0.2",
               DJANGO_SETTINGS_MODULE="unpooled.service.config.settings")
    env.pop("DATABASE_URL", None)
    subprocess.run([sys.executable, "-c", SETUP, str(corpus)], env=env, check=True, capture_output=True, timeout=300)
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "unpooled.cli.main", "serve", "--port", str(port),
                             "--web-workers", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail(f"unpooled serve did not listen on {port}: {proc.stdout.read().decode()[-2000:]}")
    yield base, kb
    proc.terminate()  # serve stops its web server and worker on SIGTERM
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the process group
    except ProcessLookupError:
        pass


def sign_up(page, base: str, username: str, role: str, team: str = "") -> None:
    page.goto(f"{base}/accounts/signup/")
    page.fill("#id_username", username)
    page.fill("#id_password", "a-long-password-1")
    page.check(f"input[name=role][value={role}]")
    if team:
        page.fill("#id_team", team)
    if role == "annotator":
        page.fill("#id_ties", "none")
    with page.expect_navigation():
        page.click("#signup-submit")


def test_sign_up_upload_watch_annotate_leaderboard(browser, server):
    base, kb = server
    from .conftest import watch_csp

    contexts = [browser.new_context(), browser.new_context()]
    violations = [watch_csp(c) for c in contexts]
    submitter = contexts[0].new_page()
    submitter.set_default_timeout(30000)
    sign_up(submitter, base, "alice", "submitter", team="Team Alice")
    assert submitter.url == f"{base}/accounts/" and "Team Alice" in submitter.inner_text("h2")

    # upload through the form (the progress bar's XHR path), then the status page takes over
    submitter.goto(f"{base}/submissions/new/")
    submitter.select_option("#id_corpus", "flow")
    submitter.fill("#id_run", "docred-original")
    submitter.set_input_files("#id_file", str(kb))
    submitter.click("#upload-submit")
    submitter.wait_for_url(lambda u: "/status/" in u, timeout=60000)
    submitter.wait_for_function("() => document.getElementById('stage').textContent.includes('waiting for labels')",
                                timeout=60000)
    needed = int(submitter.inner_text("#labels-needed"))
    assert needed > 0 and submitter.inner_text("#labels-received") == "0"
    assert "current" in submitter.get_attribute("#steps li[data-stage=annotating]", "class")

    # an in-house annotator answers every verification task with the keyboard
    annotator = contexts[1].new_page()
    annotator.set_default_timeout(30000)
    sign_up(annotator, base, "bob", "annotator")
    assert annotator.url == f"{base}/annotate/"
    with annotator.expect_navigation():
        annotator.keyboard.press("1")  # the first task type: verify
    answered = 0
    while True:
        annotator.wait_for_load_state()
        if not annotator.query_selector("#task[data-kind=verify]"):
            break
        assert "Team Alice" not in annotator.content()  # annotators never see the system
        annotator.keyboard.press("1")  # holds
        with annotator.expect_navigation():
            annotator.keyboard.press("Enter")
        answered += 1
    assert answered == needed

    # the status page follows by itself: received = needed, then published with scores
    submitter.wait_for_function("() => document.getElementById('stage').textContent.includes('published')",
                                timeout=60000)
    assert submitter.inner_text("#labels-received") == str(needed)
    row = submitter.inner_text("#scores tr[data-level=instance]")
    assert "[" in row and "]" in row
    submitter.click("#leaderboard-link")
    table = submitter.inner_text("#leaderboard")
    assert "Team Alice/docred-original" in table and "1.000" in table  # every answer said "holds"
    assert "–" in submitter.inner_text("#leaderboard td.iv .ci") and "labelled draws" in table  # the interval
    assert submitter.query_selector("figure svg") is not None
    assert violations == [[], []], f"Content-Security-Policy violations: {violations}"
