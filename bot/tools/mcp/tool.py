"""An MCP server's tool as Chorus offers it: `<server>__<tool>`, its schema normalised."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.config import McpServerSettings
from bot.tools.base import ReportProgress, ToolArgumentsError, ToolContext, ToolResult
from bot.tools.policy import matches
from bot.tools.schemas import UnsendableSchema, normalise_schema

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

log = logging.getLogger(__name__)

SEPARATOR = "__"
# What OpenAI-compatible APIs take as a function name.
NAME_LIMIT = 64
_UNSENDABLE_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]")

# A `tools/call` on the server: the tool's name there, its arguments, where its progress goes.
Call = Callable[[str, dict[str, Any], ReportProgress | None], Awaitable[ToolResult]]


@dataclass(frozen=True)
class ListedTool:
    """A tool as the server listed it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    # The server's `readOnlyHint`: such tools are offered in group chats by default.
    read_only: bool
    # The server's `destructiveHint`: a call waits for a person's yes (docs/access.md#approvals).
    destructive: bool = False


@dataclass(frozen=True)
class McpTool:
    """One of a server's tools; running it is a `tools/call` on that server's connection."""

    name: str
    description: str
    read_only: bool
    source: str
    timeout_seconds: float | None
    in_groups: bool | None
    # The name the server knows it by.
    remote_name: str
    schema: dict[str, Any]
    validator: Validator | None = field(compare=False, repr=False)
    call: Call = field(compare=False, repr=False)
    destructive: bool = False

    def parameters(self) -> dict[str, Any]:
        return self.schema

    def parse(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if self.validator is not None:
            problems = [
                f"{'.'.join(str(part) for part in error.absolute_path) or 'arguments'}: {error.message}"
                for error in self.validator.iter_errors(arguments)
            ]
            if problems:
                raise ToolArgumentsError("; ".join(sorted(problems)))
        return arguments

    async def run(self, context: ToolContext, arguments: dict[str, Any]) -> ToolResult:
        return await self.call(self.remote_name, arguments, context.on_progress)


def offered_name(server: str, tool: str) -> str:
    """`<server>__<tool>` in the characters models accept, cut to 64 with a hash that keeps it unique."""
    name = _UNSENDABLE_CHARACTERS.sub("_", f"{server}{SEPARATOR}{tool}")
    if len(name) <= NAME_LIMIT:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: NAME_LIMIT - len(digest) - 1]}_{digest}"


def offered_tools(
    server: str,
    settings: McpServerSettings,
    listed: Iterable[ListedTool],
    call: Call,
    validator: Callable[[dict[str, Any]], Validator | None],
    warned: set[str],
) -> tuple[McpTool, ...]:
    """The listed tools `include`/`exclude` let through whose schema a model can take.

    A tool left out for its schema (or a name two tools share) is warned about once
    per server connection's life: `warned` holds what was said.
    """
    tools: dict[str, McpTool] = {}
    for item in listed:
        if not matches(settings.include, item.name) or matches(settings.exclude, item.name):
            continue
        name = offered_name(server, item.name)
        try:
            schema = normalise_schema(item.input_schema)
        except UnsendableSchema as error:
            _warn_once(
                warned, f"schema:{item.name}", "MCP server %s: tool %s left out: %s", server, item.name, error
            )
            continue
        if name in tools:
            _warn_once(
                warned,
                f"name:{name}",
                "MCP server %s: tools %s and %s are both offered as %s; the first is kept",
                server,
                tools[name].remote_name,
                item.name,
                name,
            )
            continue
        tools[name] = McpTool(
            name=name,
            description=item.description,
            read_only=item.read_only,
            destructive=item.destructive,
            source=f"mcp:{server}",
            timeout_seconds=settings.timeout_seconds,
            in_groups=settings.in_groups,
            remote_name=item.name,
            schema=schema,
            validator=validator(item.input_schema),
            call=call,
        )
    return tuple(tools[name] for name in sorted(tools))


def _warn_once(warned: set[str], key: str, message: str, *arguments: object) -> None:
    if key not in warned:
        warned.add(key)
        log.warning(message, *arguments)
