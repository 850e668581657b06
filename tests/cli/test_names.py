"""One registry of names (unpooled.core.names, service/evaluations/policy.py): the CLI's choices and the API's
level enum are the registry's, and an unknown name is refused with the list of valid ones."""

import argparse
import typing

import pytest

from unpooled.cli.commands import bench, evaluate, score, submission, validate
from unpooled.core import names
from unpooled.core.errors import InvalidInputError, check_choice


def _choices(register, command, option, *extra):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    register(sub)
    p = sub.choices[command]
    for name in extra:  # nested sub-commands
        p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return tuple(next(a for a in p._actions if option in a.option_strings).choices)


def test_cli_choices_come_from_the_registry():
    from unpooled.service.evaluations.policy import SERVICE_LEVELS

    assert _choices(score.register, "score", "--level") == names.LEVELS
    assert _choices(score.register, "score", "--weights") == names.WEIGHTS
    assert _choices(score.register, "score", "--estimator") == names.ESTIMATORS
    assert _choices(score.register, "score", "--match") == names.MATCHES
    assert _choices(score.register, "score", "--corpus-format") == names.CORPUS_FORMATS
    assert _choices(validate.register, "validate", "--corpus-format") == names.CORPUS_FORMATS
    assert _choices(bench.register, "bench", "--weights", "score") == names.WEIGHTS
    assert _choices(evaluate.register, "evaluate", "--level") == SERVICE_LEVELS
    assert _choices(validate.register, "validate", "--format") == names.KB_FORMATS
    assert _choices(submission.register, "submit", "--format") == names.KB_FORMATS
    assert set(SERVICE_LEVELS) <= set(names.LEVELS)


def test_api_level_enum_is_the_service_levels():
    pytest.importorskip("django")
    from unpooled.service.evaluations.policy import SERVICE_LEVELS

    import django
    django.setup()
    from unpooled.service.api.schemas import Level

    assert typing.get_args(Level) == SERVICE_LEVELS


def test_check_choice_names_the_parameter_and_the_choices():
    check_choice("weights", "balance", names.WEIGHTS)
    with pytest.raises(InvalidInputError, match=r"weights: expected one of heuristic, balance, minvar, got 'x'"):
        check_choice("weights", "x", names.WEIGHTS)
