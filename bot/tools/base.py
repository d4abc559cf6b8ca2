"""What a tool is: a name, a description, the JSON Schema of its arguments, and a run."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from bot.errors import ToolError
from bot.storage.models import ChatSession
from bot.tools.schemas import normalise_schema

# Where a tool comes from, as `chorus tools` and the console show it.
BUILTIN_SOURCE = "builtin"
# A tool's own words about its progress, as a progress line shows them.
PROGRESS_CHARS = 48


@dataclass(frozen=True)
class ToolImage:
    """An image a tool returned (an MCP server's screenshot, say), for the model to see."""

    data: bytes
    mime_type: str


@dataclass(frozen=True)
class ToolResult:
    """What one call gave back: the text the model reads, and whether it is an error.

    Errors are results too: an unknown tool, bad arguments, a timeout or an exception
    become a result that says what went wrong, so the model can try again differently.
    """

    content: str
    is_error: bool = False
    images: tuple[ToolImage, ...] = ()

    @staticmethod
    def of(value: object) -> ToolResult:
        """A tool's return value as a result: text as it is, anything else as JSON."""
        if isinstance(value, ToolResult):
            return value
        if isinstance(value, str):
            return ToolResult(value)
        return ToolResult(json.dumps(value, ensure_ascii=False, default=str))

    @staticmethod
    def error(message: str) -> ToolResult:
        return ToolResult(message, is_error=True)


@dataclass(frozen=True)
class ToolProgress:
    """How far a running call is, as its tool reports it (an MCP server's `notifications/progress`)."""

    progress: float
    total: float | None = None
    message: str | None = None

    @property
    def text(self) -> str:
        """Short, for a progress line: the tool's own words, else `2/4` (or `2` without a total)."""
        words = " ".join((self.message or "").split())
        if words:
            return words if len(words) <= PROGRESS_CHARS else words[: PROGRESS_CHARS - 1] + "…"
        return f"{self.progress:g}/{self.total:g}" if self.total else f"{self.progress:g}"


ReportProgress = Callable[[ToolProgress], None]


@dataclass(frozen=True)
class ChatAddress:
    """Where the turn's person is: what a reminder needs to reach them there later."""

    lane: str
    chat_id: str
    chat_kind: str  # "private" | "group"
    thread_id: str | None = None


@dataclass(frozen=True)
class ToolContext:
    """The call a tool runs for: the conversation, the persona that called, and the chat."""

    session: ChatSession
    persona_id: str
    # None for a turn that came from no chat a message could be sent to.
    chat: ChatAddress | None
    # A group chat: tools act on the group's memory and context, never a person's.
    group: bool
    call_id: str
    # The stored row of the call (None in a round of reads only: its call is stored with
    # its first result), and the first message the model saw in its context.
    seq: int | None = None
    window_from_seq: int | None = None
    # Where a tool that can tell how far it is reports it, for the lane's progress line.
    on_progress: ReportProgress | None = None


class ToolArgumentsError(ToolError):
    """The arguments do not match the tool's schema; the message says how."""


class Tool(Protocol):
    """Any tool: built-in (`FunctionTool`) or an MCP server's."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def read_only(self) -> bool:
        """True for a tool that only reads: such tools are offered in group chats by default."""
        ...

    @property
    def destructive(self) -> bool:
        """True for a tool whose calls change what cannot be changed back: they wait for a yes."""
        ...

    @property
    def source(self) -> str:
        """`builtin`, or `mcp:<server>`."""
        ...

    @property
    def timeout_seconds(self) -> float | None:
        """Its own bound on one run; None takes `tools.timeout_seconds`."""
        ...

    @property
    def in_groups(self) -> bool | None:
        """Its own rule for group chats; None follows `tools.in_groups`."""
        ...

    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of its arguments, in the shape OpenAI-compatible models accept."""
        ...

    def parse(self, arguments: dict[str, Any]) -> object:
        """The arguments checked against the schema; raises `ToolArgumentsError`."""
        ...

    async def run(self, context: ToolContext, arguments: Any) -> ToolResult: ...


Arguments = TypeVar("Arguments", bound=BaseModel)
Handler = Callable[[ToolContext, Arguments], Awaitable[object]]


@dataclass(frozen=True)
class FunctionTool(Generic[Arguments]):
    """A built-in tool: a pydantic model for its arguments and one async function doing the work.

    The schema sent to the model comes from the model (`model_json_schema`), and the same
    model validates what the model sent back.
    """

    name: str
    description: str
    arguments: type[Arguments]
    handler: Handler[Arguments]
    read_only: bool
    source: str = BUILTIN_SOURCE
    timeout_seconds: float | None = None
    in_groups: bool | None = None
    destructive: bool = False

    def parameters(self) -> dict[str, Any]:
        return arguments_schema(self.arguments)

    def parse(self, arguments: dict[str, Any]) -> Arguments:
        try:
            return self.arguments.model_validate(arguments)
        except ValidationError as error:
            raise ToolArgumentsError(validation_message(error)) from None

    async def run(self, context: ToolContext, arguments: Arguments) -> ToolResult:
        return ToolResult.of(await self.handler(context, arguments))


def validation_message(error: ValidationError) -> str:
    """Pydantic's errors as one line a model can act on: `query: Field required; k: …`."""
    problems = []
    for issue in error.errors():
        where = ".".join(str(part) for part in issue["loc"]) or "arguments"
        problems.append(f"{where}: {issue['msg']}")
    return "; ".join(problems)


@cache
def arguments_schema(arguments: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments, made once per model and shared (read-only).

    Every model call of a turn sends the offered tools' schemas; pydantic builds one in
    about 4 ms, which made schema generation most of a tool round's CPU.
    """
    return normalise_schema(arguments.model_json_schema())


def function_schema(tool: Tool) -> dict[str, Any]:
    """The tool as the Chat Completions API's `tools` list holds it."""
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters()},
    }
