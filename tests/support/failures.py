"""Unforeseen failures inside a turn, for the containment tests of every lane.

`raise_in_provider` makes the runtime's next model call raise a plain TypeError (as a
client library's bug does: anthropic 2.17 raised one for `temperature`); `broken_tool`
is a tool whose run raises one. `assert_contained` checks what a contained turn leaves,
`assert_tool_failure_answered` what a turn whose tool raised leaves.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from pydantic import BaseModel
from sqlmodel import Session, select

from bot.providers.base import ChatProvider, ChatRequest, ModelEvent
from bot.runtime import Runtime
from bot.storage.models import Message
from bot.tools.base import FunctionTool, ToolContext
from bot.tools.registry import StaticTools
from bot.turns.containment import FAILED_MESSAGE
from bot.turns.recorder import RECOVERABLE_LANES

PROVIDER_BUG = "unsupported operand type(s) for +: 'int' and 'NoneType'"
FAILED_TEXT = FAILED_MESSAGE.format(kind="TypeError")


class _RaisesOnce:
    """Delegates to the real provider, except that its next stream raises TypeError."""

    def __init__(self, inner: ChatProvider) -> None:
        self.inner = inner
        self.armed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def stream(self, request: ChatRequest) -> AsyncGenerator[ModelEvent, None]:
        if self.armed:
            self.armed = False
            raise TypeError(PROVIDER_BUG)
        async for event in self.inner.stream(request):
            yield event


def raise_in_provider(runtime: Runtime) -> None:
    observed = runtime.engine.provider  # the ObservedProvider every model call goes through
    observed.inner = _RaisesOnce(observed.inner)  # type: ignore[attr-defined]


class Nothing(BaseModel):
    pass


def broken_tool(name: str = "broken") -> FunctionTool[Nothing]:
    async def run(context: ToolContext, arguments: Nothing) -> object:
        return None + 1  # type: ignore[operator]

    return FunctionTool(name, "A tool with a bug.", Nothing, run, read_only=True)


def install_broken_tool(runtime: Runtime, name: str = "broken") -> None:
    runtime.tools.add_source(StaticTools([broken_tool(name)]))


def stored_message(runtime: Runtime, lane: str, text: str) -> Message:
    """The person's message `text` as `lane` stored it (exactly one such row)."""
    with Session(runtime.stores.database) as session:
        stored = session.exec(select(Message).where(Message.content == text, Message.lane == lane)).one()
    assert stored.id is not None
    return stored


def assert_logged_once(caplog: pytest.LogCaptureFixture, kind: type[BaseException] = TypeError) -> None:
    """One ERROR record carries the `kind` error's traceback: logged once, not once per layer."""
    logged = [
        record
        for record in caplog.records
        if record.exc_info and record.exc_info[0] is kind and record.levelno >= logging.ERROR
    ]
    assert len(logged) == 1, [record.getMessage() for record in logged]


def assert_contained(runtime: Runtime, lane: str, text: str, caplog: pytest.LogCaptureFixture) -> None:
    """The person's message `text` is stored, its delivery (lanes that keep one) failed, and the
    traceback logged once."""
    stored = stored_message(runtime, lane, text)
    assert stored.id is not None
    kept = lane in RECOVERABLE_LANES
    assert runtime.stores.deliveries.state_of(stored.id) == ("failed" if kept else None)
    assert_logged_once(caplog)


def assert_tool_failure_answered(
    runtime: Runtime, lane: str, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool that raised was told to the model, which answered: the message `text` is stored, its
    delivery replied, not failed (a lane that showed the reply in full drops the row), and the
    tool's traceback is logged once."""
    stored = stored_message(runtime, lane, text)
    assert stored.id is not None
    assert runtime.stores.deliveries.state_of(stored.id) in (None, "replied")
    assert_logged_once(caplog)
