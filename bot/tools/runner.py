"""Running one tool call into a result that never raises, bounded in time, counted and logged."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping

from bot.errors import ChorusError
from bot.metrics import TOOL_CALLS, TOOL_SECONDS
from bot.providers.base import ToolCall
from bot.tools.base import Tool, ToolArgumentsError, ToolContext, ToolResult

log = logging.getLogger(__name__)


async def run_call(
    call: ToolCall, tools: Mapping[str, Tool], context: ToolContext, default_timeout: float
) -> ToolResult:
    """`call` run with the tool of its name among `tools` (those offered this turn).

    Whatever goes wrong becomes an error result naming it — an unknown tool, arguments
    that are not JSON or do not fit the schema, an exception, a timeout — so the model
    can recover; cancellation (`/stop`, shutdown) is the one thing that propagates.
    """
    started = time.perf_counter()
    tool = tools.get(call.name)
    result = await _run(call, tool, tools, context, default_timeout)
    elapsed = time.perf_counter() - started
    outcome = "error" if result.is_error else "ok"
    TOOL_CALLS.labels(call.name if tool is not None else "unknown", outcome).inc()
    TOOL_SECONDS.labels(tool.source if tool is not None else "unknown").observe(elapsed)
    # Names and sizes only: arguments and results can hold what people said.
    fields = {
        "tool": call.name,
        "source": tool.source if tool is not None else "unknown",
        "call_id": call.id,
        "outcome": outcome,
        "seconds": round(elapsed, 3),
        "argument_chars": len(call.arguments),
        "result_chars": len(result.content),
    }
    log.info("tool call %s %s in %.3f s", call.name, outcome, elapsed, extra={"fields": fields})
    return result


async def _run(
    call: ToolCall, tool: Tool | None, tools: Mapping[str, Tool], context: ToolContext, default_timeout: float
) -> ToolResult:
    if tool is None:
        offered = ", ".join(sorted(tools)) or "none"
        return ToolResult.error(f"There is no tool named {call.name!r}. Tools you can call: {offered}.")
    try:
        raw = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as error:
        return ToolResult.error(f"The arguments are not valid JSON ({error.msg}); send a JSON object.")
    if not isinstance(raw, dict):
        return ToolResult.error("The arguments must be a JSON object.")
    try:
        arguments = tool.parse(raw)
    except ToolArgumentsError as error:
        return ToolResult.error(f"The arguments do not fit {tool.name}: {error}")
    timeout = tool.timeout_seconds or default_timeout
    try:
        async with asyncio.timeout(timeout):
            return await tool.run(context, arguments)
    except TimeoutError:
        return ToolResult.error(f"{tool.name} did not finish within {timeout:g} seconds.")
    except ChorusError as error:
        return ToolResult.error(str(error))
    except Exception as error:
        log.exception("tool %s failed", tool.name)
        return ToolResult.error(f"{tool.name} failed: {type(error).__name__}: {error}")
