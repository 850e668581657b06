"""The OpenAPI document parses as Swagger UI parses it: as YAML, where a key given twice is an error (an
``openapi_extra`` response keyed ``"200"`` beside django-ninja's ``200`` once blanked the API docs page)."""

import json

import pytest


@pytest.mark.db
def test_openapi_document_has_no_repeated_key(client):
    raw = client.get("/api/openapi.json").content.decode()
    repeated = []

    def pairs(items):
        keys = [k for k, _ in items]
        repeated.extend(sorted({k for k in keys if keys.count(k) > 1}))
        return dict(items)

    doc = json.loads(raw, object_pairs_hook=pairs)
    assert repeated == [], f"keys given twice in one object of /api/openapi.json: {repeated}"
    assert doc["paths"], "the document lists the API's paths"
