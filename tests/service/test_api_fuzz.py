"""schemathesis against the whole API, every method, anonymously and with a team's token (the probe's section 8).

For every operation of ``/api/openapi.json``, requests generated from the schema, valid ones and invalid ones
(wrong types, missing fields, out-of-range numbers, unknown enum values, malformed bodies), each sent once
without credentials and once with team red's token, through the WSGI application (real database, the real
task queue). Every answer must be a documented status with a JSON body that matches its schema, never a 5xx,
and no invalid request may be accepted (schemathesis' ``negative_data_rejection``; query parameters an operation
does not declare are ignored, as HTTP APIs do, and counted apart). The examples are bounded
(derandomized, no example database) so the test takes well under a minute on a loaded 2-core machine.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager

import pytest

from .test_api import corpus, people, publish, score, subs  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

EXAMPLES = {"positive": 25, "negative": 25}
#: how the API says a text holds a control, invisible or direction-changing character (submissions.names)
HIDDEN = "which readers would not see as written"


def _only_extra_query(case) -> bool:
    """A negative case whose only fault is query parameters the operation does not declare."""
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    return (getattr(data, "description", "") == "violates `additionalProperties`"
            and getattr(getattr(data, "parameter_location", None), "value", "") == "query")


def _invalid_value_not_sent(case) -> bool:
    """A negative case whose invalid value is an empty list in the query: it is sent as no parameter at all (a valid
    request: ``?period=`` omitted)."""
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    where = getattr(data, "description", "") or ""
    return any(v == [] and f"/properties/{k}" in where for k, v in (case.query or {}).items())


def _hidden_refused(resp) -> bool:
    """A run name or description with a character readers would not see as written, refused as the schema's field
    descriptions say (a JSON-schema pattern cannot name Unicode's categories): not a valid request wrongly
    rejected."""
    return resp.status_code == 400 and HIDDEN in resp.text


@contextmanager
def wsgi_schema():
    """The served schema, its operations called through the WSGI application in the test's transaction."""
    schemathesis = pytest.importorskip("schemathesis")
    from django.core import signals
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import close_old_connections

    # as Django's test client does: a bare WSGIHandler would close the test's connection (and its transaction)
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/openapi.json", WSGIHandler())
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def known(corpus, subs) -> dict:
    """Path parameters that exist: the corpus, its first document, red's private submission, period 1."""
    return {"name": corpus.name, "doc_id": corpus.documents.order_by("pk").first().doc_id, "pk": subs["red_priv"].pk,
            "number": 1}


def fuzz(ops, fixed_params: dict, callers: list[dict | None]) -> Counter:
    """Each of ``ops`` with generated requests, sent as each of ``callers`` (their headers, and only those
    credentials; ``None``: anonymous), with
    random path parameters and then ``fixed_params`` (so that the queries and bodies reach the endpoint's own
    checks); returns the outcomes counted."""
    from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    def accepts_valid_data(ctx, response, case):
        """schemathesis' positive_data_acceptance, but for hidden characters refused (:func:`_hidden_refused`)."""
        return None if _hidden_refused(response) else positive_data_acceptance(ctx, response, case)

    tally: Counter = Counter()
    for op in ops:
        names = {p.name for p in op.path_parameters}
        fixed = {k: v for k, v in fixed_params.items() if k in names}
        for mode, fixed_path in [(m, None) for m in EXAMPLES] + [(m, fixed) for m in EXAMPLES if fixed]:
            strategy = op.as_strategy(generation_mode=GenerationMode(mode), path_parameters=fixed_path)

            @given(case=strategy, headers=st.sampled_from(callers))
            @hsettings(max_examples=EXAMPLES[mode], deadline=None, database=None, derandomize=True,
                       suppress_health_check=list(HealthCheck))
            def check(case, headers):
                # schemathesis makes up a bearer token and a session cookie (the security schemes): a request is
                # sent with the caller's credentials or none, else it would only ever test an unknown token (401)
                case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
                case.cookies = {}
                resp = case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance],
                                              additional_checks=[accepts_valid_data])
                kind = case.meta.generation.mode.value
                if kind == "positive" and _hidden_refused(resp):
                    kind = "hidden characters refused"
                if kind == "negative" and _only_extra_query(case):
                    kind = "unknown query parameters"  # ignored, as HTTP APIs do (not a wrong acceptance)
                elif kind == "negative" and _invalid_value_not_sent(case):
                    kind = "invalid value not sent"
                tally[kind] += 1
                tally[f"{kind} {resp.status_code // 100}xx"] += 1

            try:
                check()
            except Unsatisfiable:  # nothing to make invalid (no parameters, as /api/me)
                assert mode == "negative", op.label
                tally["no negative cases"] += 1
    return tally


def test_every_operation_conforms_and_never_fails(corpus, people, subs):
    score(subs["red_pub"], f1=0.7, lo=0.6, hi=0.8)
    publish(subs["red_pub"])
    with wsgi_schema() as schema:
        ops = [r.ok() for r in schema.get_all_operations()]
        assert {(op.method.upper(), op.path) for op in ops} >= {("POST", "/api/submissions"),
                                                                 ("PATCH", "/api/submissions/{pk}")}
        assert len(ops) == 23  # 16 + the periods (list, open, close, release) + the entity scores and their board
        # + the leaderboard's pairwise table
        tally = fuzz(ops, known(corpus, subs), [None, {"Authorization": f"Bearer {people['red']}"}])
    print("schemathesis cases:", dict(sorted(tally.items())))
    assert tally["positive 5xx"] == tally["negative 5xx"] == 0
    assert tally["negative 2xx"] == 0  # no invalid request accepted
    assert tally["positive 2xx"] > 0 and tally["negative"] > 100


def _session(user) -> dict:
    """The headers of a signed-in browser that sends the CSRF token (as the docs page does)."""
    from django.test import Client

    c = Client()
    c.force_login(user)
    c.get("/api/docs")
    cookies = "; ".join(f"{k}={v.value}" for k, v in c.cookies.items())
    return {"Cookie": cookies, "X-CSRFToken": c.cookies["csrftoken"].value}


def test_every_write_conforms_for_every_kind_of_caller(corpus, people, subs):
    """The writes (upload, change a submission, open and close a period) as the callers the first test leaves out:
    an organiser's token, another team's token (blue, against red's submission), an annotator's session and an
    organiser's session (with the CSRF token).  Documented statuses and shapes, never a 5xx, no invalid request
    accepted; and the organiser's valid requests do reach a 2xx (a period opened, an upload taken)."""
    from unpooled.service.accounts.actions import do_issue_token

    olga_token = do_issue_token(people["olga"], "ci")[1]
    callers = [{"Authorization": f"Bearer {olga_token}"}, {"Authorization": f"Bearer {people['blue']}"},
               _session(people["anna"]), _session(people["olga"])]
    with wsgi_schema() as schema:
        ops = [r.ok() for r in schema.get_all_operations() if r.ok().method.upper() != "GET"]
        assert sorted((op.method.upper(), op.path) for op in ops) == [
            ("PATCH", "/api/submissions/{pk}"), ("POST", "/api/corpora/{name}/periods"),
            ("POST", "/api/corpora/{name}/periods/{number}/close"), ("POST", "/api/submissions")]
        tally = fuzz(ops, known(corpus, subs), callers)
    print("schemathesis cases (writes):", dict(sorted(tally.items())))
    assert tally["positive 5xx"] == tally["negative 5xx"] == 0
    assert tally["negative 2xx"] == 0
    assert tally["positive 2xx"] > 0 and tally["negative"] > 50
