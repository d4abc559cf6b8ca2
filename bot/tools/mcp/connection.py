"""One MCP server's connection over its life: started, listed, watched, lost, restarted, closed.

A holder task owns the SDK client (its streams and task groups belong to the task
that opened them); turns call tools through it from their own tasks. A server that
fails to start or goes away is `down`: its tools answer with an error result that
says so. A server that was up is started again in the background once the backoff
(1 s, doubling up to 60 s) has passed — its exit is seen the moment the transport
ends, not at the next call — until it is up again; one that never came up is started
by the next call or turn after the backoff. Nothing here raises into a turn.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import anyio

from bot.config import McpServerSettings
from bot.errors import ToolError
from bot.metrics import MCP_CALLS, MCP_RESTARTS, MCP_SERVER_STATE
from bot.tools.base import ReportProgress, ToolResult
from bot.tools.mcp.expansion import Secrets
from bot.tools.mcp.tool import ListedTool, McpTool, offered_tools

if TYPE_CHECKING:
    from mcp import Client

log = logging.getLogger(__name__)

State = Literal["starting", "ready", "down", "stopped"]
STATES: tuple[State, ...] = ("starting", "ready", "down", "stopped")

FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 60.0
# A stdio server gets its stdin closed, 2 s, SIGTERM, 2 s, SIGKILL (the SDK's sequence).
CLOSE_SECONDS = 10.0


def retry_delay(failures: int) -> float:
    """The wait before restart number `failures` (1, 2, 4 … 60 seconds)."""
    return min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2.0 ** max(failures - 1, 0))


@dataclass(frozen=True)
class McpServerStatus:
    """What /healthz, the console and `chorus tools` show about one server."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    state: State
    tools: tuple[str, ...]
    last_error: str | None
    since: datetime
    restarts: int
    retry_in_seconds: float | None


class ServerDown(ToolError):
    """The server cannot take a call now; the message says why and when it is tried again."""


async def load_sdk() -> None:
    """The SDK imported in a thread: seconds of pydantic models, never on the event loop."""
    await asyncio.to_thread(importlib.import_module, "bot.tools.mcp.sdk")


def _in_loop() -> bool:
    """Whether a start can be scheduled: a listing outside the event loop only reads."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class McpConnection:
    def __init__(
        self,
        name: str,
        settings: McpServerSettings,
        environ: Mapping[str, str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.settings = settings
        self.secrets = Secrets(environ)
        self.tools: tuple[McpTool, ...] = ()
        self.state: State = "starting"
        self.last_error: str | None = None
        self.since = datetime.now(UTC)
        self.restarts = 0
        self._clock = clock
        self._failures = 0
        self._retry_at = 0.0
        self._generation = 0
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._attempt: asyncio.Future[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._closing = False
        # Set once the server has been up: from then on a lost server is restarted in the background.
        self._was_up = False
        self._restart: asyncio.TimerHandle | None = None
        self._warned: set[str] = set()
        # The last HTTP error status of this attempt: the SDK's own errors do not say it.
        self._http_error: str | None = None
        self._show_state()

    # --- what the registry and the operator see ---------------------------------------

    def status(self) -> McpServerStatus:
        retry_in = None
        if self.state == "down":
            retry_in = max(0.0, self._retry_at - self._clock())
        return McpServerStatus(
            name=self.name,
            transport=self.settings.transport or "stdio",
            state=self.state,
            tools=tuple(tool.name for tool in self.tools),
            last_error=self.last_error,
            since=self.since,
            restarts=self.restarts,
            retry_in_seconds=retry_in,
        )

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        """Connect in the background; returns at once."""
        if self._holder is None and not self._closing:
            self._spawn()

    def retry_if_due(self) -> None:
        """Start the server again when it is down and its backoff has passed."""
        if self.state == "down" and not self._closing and self._clock() >= self._retry_at and _in_loop():
            self.restarts += 1
            MCP_RESTARTS.labels(self.name).inc()
            log.info("MCP server %s: restarting (attempt %d)", self.name, self.restarts)
            self._spawn()

    async def settled(self) -> None:
        """Until the current start is over, one way or the other."""
        if self._attempt is not None:
            await asyncio.shield(self._attempt)

    async def aclose(self) -> None:
        """Close the connection; a stdio server's process is ended with it."""
        self._closing = True
        if self._restart is not None:
            self._restart.cancel()
        holder = self._holder
        if holder is not None and not holder.done():
            if self._scope is not None:
                self._scope.cancel()
            done, _ = await asyncio.wait({holder}, timeout=CLOSE_SECONDS)
            if not done:
                log.warning("MCP server %s did not close within %.0f s", self.name, CLOSE_SECONDS)
                holder.cancel()
                await asyncio.gather(holder, return_exceptions=True)
        self.tools = ()
        self._set_state("stopped")

    def _spawn(self) -> None:
        self._generation += 1
        loop = asyncio.get_running_loop()
        self._attempt = loop.create_future()
        self._set_state("starting")
        self._holder = loop.create_task(
            self._hold(self._generation, self._attempt), name=f"mcp-server:{self.name}"
        )

    async def _hold(self, generation: int, attempt: asyncio.Future[None]) -> None:
        try:
            await load_sdk()
            if not self._closing:
                await self._connect_and_serve(generation)
        except Exception as error:
            self._down(generation, error)
        finally:
            self._client = None
            self._scope = None
            if not attempt.done():
                attempt.set_result(None)

    async def _connect_and_serve(self, generation: int) -> None:
        import bot.tools.mcp.sdk as sdk

        startup = self.settings.startup_timeout_seconds
        changed = asyncio.Event()
        ready = False
        self._http_error = None
        with anyio.CancelScope(deadline=anyio.current_time() + startup) as scope:
            self._scope = scope
            closed = partial(self._closed_by_server, generation)
            async with sdk.connected(
                self.name, self.settings, self.secrets, changed.set, self._heard, closed
            ) as client:
                self._up(generation, client, await sdk.list_tools(client))
                ready = True
                scope.deadline = math.inf
                await self._serve(client, generation, changed)
        if self._closing:
            return
        if not ready and scope.cancelled_caught:
            self._down(generation, TimeoutError(f"it did not start within {startup:g} seconds"))
        elif ready:
            self._down(generation, ConnectionError("the connection ended"))

    def _heard(self, problem: str) -> None:
        self._http_error = problem

    def _closed_by_server(self, generation: int, reason: str) -> None:
        import bot.tools.mcp.sdk as sdk

        self._down(generation, sdk.ConnectionLost(reason))

    async def _serve(self, client: Client, generation: int, changed: asyncio.Event) -> None:
        """Keep the connection open; re-list when the server says its tools changed."""
        import bot.tools.mcp.sdk as sdk

        async def relist() -> None:
            self._list(generation, await sdk.list_tools(client))

        async def on_notified() -> None:
            while True:
                await changed.wait()
                changed.clear()
                await relist()

        async with anyio.create_task_group() as group:
            group.start_soon(sdk.watch_tool_list, client, relist)
            group.start_soon(on_notified)
            await anyio.sleep_forever()

    def _up(self, generation: int, client: Client, listed: Sequence[ListedTool]) -> None:
        self._client = client
        self._failures = 0
        self._was_up = True
        self.last_error = None
        self._list(generation, listed)
        self._set_state("ready")
        self._settle()
        log.info("MCP server %s: ready with %d tools", self.name, len(self.tools))

    def _list(self, generation: int, listed: Sequence[ListedTool]) -> None:
        import bot.tools.mcp.sdk as sdk

        if generation != self._generation:
            return
        self.tools = offered_tools(self.name, self.settings, listed, self.call, sdk.validator, self._warned)
        log.info("MCP server %s: %d tools offered (%d listed)", self.name, len(self.tools), len(listed))

    def _down(self, generation: int, error: BaseException) -> None:
        """This attempt failed or its connection was lost: wait out the backoff, then restart."""
        import bot.tools.mcp.sdk as sdk

        if generation != self._generation or self.state == "down" or self._closing:
            return
        self._failures += 1
        delay = retry_delay(self._failures)
        self._retry_at = self._clock() + delay
        described = sdk.describe(error)
        if self._http_error is not None and self._http_error not in described:
            described = f"{described} ({self._http_error})"
        self.last_error = self.secrets.mask(described)
        self._client = None
        self._set_state("down")
        self._settle()
        if self._scope is not None:
            # The holder leaves the dead connection: its transport closes, a child is reaped.
            self._scope.cancel()
        if self._was_up:
            self._restart_in(delay)
        log.warning("MCP server %s is down: %s; restarting in %.0f s", self.name, self.last_error, delay)

    def _restart_in(self, delay: float) -> None:
        if self._restart is not None:
            self._restart.cancel()
        self._restart = asyncio.get_running_loop().call_later(delay, self._restart_when_due)

    def _restart_when_due(self) -> None:
        """The background restart: the loop's timer may fire a hair before `_clock` says it is due."""
        self._restart = None
        early = self._retry_at - self._clock()
        if self.state == "down" and early > 0:
            self._restart_in(early)
        else:
            self.retry_if_due()

    def _settle(self) -> None:
        if self._attempt is not None and not self._attempt.done():
            self._attempt.set_result(None)

    def _set_state(self, state: State) -> None:
        if state != self.state:
            self.state = state
            self.since = datetime.now(UTC)
        self._show_state()

    def _show_state(self) -> None:
        for each in STATES:
            MCP_SERVER_STATE.labels(self.name, each).set(1 if each == self.state else 0)

    # --- calls --------------------------------------------------------------------------

    async def call(
        self, remote_name: str, arguments: dict[str, Any], on_progress: ReportProgress | None = None
    ) -> ToolResult:
        """`tools/call` on this server; every failure is a result that says what happened.

        The progress the server reports while the call runs goes to `on_progress`.
        """
        import bot.tools.mcp.sdk as sdk

        try:
            client, generation = await self._ready_client()
        except ServerDown as down:
            MCP_CALLS.labels(self.name, "down").inc()
            return ToolResult.error(str(down))
        try:
            result = await sdk.call_tool(client, remote_name, arguments, on_progress)
        except sdk.ConnectionLost as lost:
            # Its exit may have been seen already: this call ran into it all the same.
            self._down(generation, lost)
            MCP_CALLS.labels(self.name, "down").inc()
            return ToolResult.error(
                f"The MCP server {self.name} stopped answering ({self.last_error}); the call did not "
                f"run to the end. Chorus restarts the server in {retry_delay(self._failures):.0f} s "
                "for later calls."
            )
        MCP_CALLS.labels(self.name, "error" if result.is_error else "ok").inc()
        return result

    async def _ready_client(self) -> tuple[Client, int]:
        if self._closing:
            raise ServerDown(f"The MCP server {self.name} is closed: Chorus is shutting down.")
        if self.state == "down":
            wait = self._retry_at - self._clock()
            if wait > 0:
                raise ServerDown(
                    f"The MCP server {self.name} is down ({self.last_error}). "
                    f"Chorus tries to restart it in {math.ceil(wait)} s; answer without this tool for now."
                )
            self.retry_if_due()
        elif self._holder is None:
            self.start()
        # A start under way: the call waits for it, within the call's own time bound.
        await self.settled()
        if self.state == "ready" and self._client is not None:
            return self._client, self._generation
        raise ServerDown(f"The MCP server {self.name} could not be started: {self.last_error}.")
