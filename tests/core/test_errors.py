"""One hierarchy: every error Chorus raises is a `ChorusError`; metric labels are data."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterator

import pytest

import bot
import channels
from bot.errors import ChorusError
from bot.metrics import REGISTRY
from bot.turns.rounds import note_shed
from tests.transcript.factories import build, user
from transcript import Budget
from transcript.shedding import ShedNote


def _modules() -> Iterator[str]:
    for package in (bot, channels):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            # `python -m` entry points run the command when imported.
            if not module.name.endswith(".__main__"):
                yield module.name


def _own_exceptions() -> Iterator[type[BaseException]]:
    """Public exception classes defined (not imported) in Chorus's runtime and lanes."""
    for name in _modules():
        module = importlib.import_module(name)
        for attribute, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and not attribute.startswith("_")
            ):
                yield value


def test_every_error_chorus_defines_is_a_chorus_error() -> None:
    outside = sorted(
        f"{error.__module__}.{error.__qualname__}"
        for error in _own_exceptions()
        if not issubclass(error, ChorusError)
    )
    assert outside == []


def test_the_walk_finds_the_errors_that_were_outside() -> None:
    # The walk sees classes defined across the packages, so the test above cannot pass empty.
    found = {error.__qualname__ for error in _own_exceptions()}
    assert {"DeliveryRefused", "RetryableFailure", "ToolArgumentsError", "ServerDown", "NotFound"} <= found


def _shed_count(part: str) -> float:
    return REGISTRY.get_sample_value("chorus_context_shed_total", {"part": part}) or 0.0


def test_the_shed_metric_is_labelled_by_the_part_that_gave_way() -> None:
    summary = "An earlier talk about the trip: " + "the train to Porto, the hotel, the dates. " * 60
    context = build([user(1, "Which hotel did we pick?")], budget=Budget(max_tokens=260), summary=summary)
    assert context.stats.shed and all(isinstance(note, ShedNote) for note in context.stats.shed)
    before = {note.part: _shed_count(note.part) for note in context.stats.shed}

    note_shed("session-1", "a-model", context)

    assert {part: _shed_count(part) - count for part, count in before.items()} == dict.fromkeys(before, 1.0)
    assert "summary" in before


@pytest.mark.parametrize(
    "note", [ShedNote("summary", "shortened"), ShedNote("tools", "1 of 4 schemas left out (kept: a: b)")]
)
def test_a_shed_note_reads_as_one_line(note: ShedNote) -> None:
    assert str(note) == f"{note.part}: {note.detail}"
