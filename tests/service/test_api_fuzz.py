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

import pytest

from .test_api import corpus, people, publish, score, subs  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

EXAMPLES = {"positive": 25, "negative": 25}
#: how the API says a text holds a control, invisible or direction-changing character (submissions.names)
HIDDEN = "which readers would not see as written"
TALLY: Counter = Counter()


def _only_extra_query(case) -> bool:
    """A negative case whose only fault is query parameters the operation does not declare."""
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    return (getattr(data, "description", "") == "violates `additionalProperties`"
            and getattr(getattr(data, "parameter_location", None), "value", "") == "query")


def _hidden_refused(resp) -> bool:
    """A run name or description with a character readers would not see as written, refused as the schema's field
    descriptions say (a JSON-schema pattern cannot name Unicode's categories): not a valid request wrongly
    rejected."""
    return resp.status_code == 400 and HIDDEN in resp.text


def test_every_operation_conforms_and_never_fails(corpus, people, subs):
    schemathesis = pytest.importorskip("schemathesis")
    from django.core import signals
    from django.core.handlers.wsgi import WSGIHandler
    from django.db import close_old_connections
    from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    def accepts_valid_data(ctx, response, case):
        """schemathesis' positive_data_acceptance, but for the refusal of hidden characters (:func:`_hidden_refused`)."""
        return None if _hidden_refused(response) else positive_data_acceptance(ctx, response, case)

    score(subs["red_pub"], f1=0.7, lo=0.6, hi=0.8)
    publish(subs["red_pub"])
    # as Django's test client does: a bare WSGIHandler would close the test's connection (and its transaction)
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        schema = schemathesis.openapi.from_wsgi("/api/openapi.json", WSGIHandler())
        ops = [r.ok() for r in schema.get_all_operations()]
        assert {(op.method.upper(), op.path) for op in ops} >= {("POST", "/api/submissions"),
                                                                 ("PATCH", "/api/submissions/{pk}")}
        assert len(ops) == 23  # 16 + the periods (list, open, close, release) + the entity scores and their board
        # + the leaderboard's pairwise table
        doc = corpus.documents.order_by("pk").first().doc_id
        known = {"name": corpus.name, "doc_id": doc, "pk": subs["red_priv"].pk}
        for op in ops:
            names = {p.name for p in op.path_parameters}
            fixed = {k: v for k, v in known.items() if k in names}
            # random path parameters, then (where it has some) the real corpus, document and red's private
            # submission, so that the generated queries and bodies reach the endpoint's own checks
            for mode, fixed_path in [(m, None) for m in EXAMPLES] + [(m, fixed) for m in EXAMPLES if fixed]:
                n = EXAMPLES[mode]
                strategy = op.as_strategy(generation_mode=GenerationMode(mode), path_parameters=fixed_path)

                @given(case=strategy, token=st.sampled_from([None, people["red"]]))
                @hsettings(max_examples=n, deadline=None, database=None, derandomize=True,
                           suppress_health_check=list(HealthCheck))
                def check(case, token):
                    resp = case.call_and_validate(headers={"Authorization": f"Bearer {token}"} if token else None,
                                                  excluded_checks=[positive_data_acceptance],
                                                  additional_checks=[accepts_valid_data])
                    kind = case.meta.generation.mode.value
                    if kind == "positive" and _hidden_refused(resp):
                        kind = "hidden characters refused"
                    if kind == "negative" and _only_extra_query(case):
                        kind = "unknown query parameters"  # ignored, as HTTP APIs do (not a wrong acceptance)
                    TALLY[kind] += 1
                    TALLY[f"{kind} {resp.status_code // 100}xx"] += 1

                try:
                    check()
                except Unsatisfiable:  # nothing to make invalid (no parameters, as /api/me)
                    assert mode == "negative", op.label
                    TALLY["no negative cases"] += 1
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)
    print("schemathesis cases:", dict(sorted(TALLY.items())))
    assert TALLY["positive 5xx"] == TALLY["negative 5xx"] == 0
    assert TALLY["negative 2xx"] == 0  # no invalid request accepted
    assert TALLY["positive 2xx"] > 0 and TALLY["negative"] > 100
