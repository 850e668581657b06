"""json_text.loads: every way a text is not one JSON value is a located JSONDecodeError."""

from __future__ import annotations

import json

import pytest

from unpooled.core import json_text


def test_bytes_that_are_not_utf8_are_named_as_such_not_as_a_long_number():
    with pytest.raises(json.JSONDecodeError) as err:
        json_text.loads(b'{"a": "caf\xe9"}')
    assert "not UTF-8" in err.value.msg and "byte 10" in err.value.msg and err.value.pos == 10


def test_a_key_given_twice_is_refused_and_located_at_its_second_time():
    text = '{"a": 1, "b": {"c": 2}, "a": 3}'
    with pytest.raises(json.JSONDecodeError) as err:
        json_text.loads(text)
    assert err.value.msg == "the key 'a' is given twice in one object" and err.value.pos == text.rindex('"a"')
    with pytest.raises(json.JSONDecodeError, match="'c' is given twice"):
        json_text.loads('{"b": {"c": 1, "c": 1}}')
    text = '{"é": 1, "é": 2}'
    with pytest.raises(json.JSONDecodeError) as err:
        json_text.loads(text)
    assert err.value.pos == text.rindex('"é"')
    assert json_text.loads('[{"a": 1}, {"a": 2}]') == [{"a": 1}, {"a": 2}]


def test_finite_makes_every_figure_json_can_hold():
    import numpy as np

    got = json_text.finite({"a": [np.float64("nan"), np.float32(np.inf), np.float32(1.5), 2, None, True, "x"],
                            "b": (float("-inf"),)})
    assert got == {"a": [None, None, 1.5, 2, None, True, "x"], "b": [None]}
    json.dumps(got, allow_nan=False)
