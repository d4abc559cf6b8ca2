"""`chorus doctor`: is this deployment ready? One line per check, and what to do when it is not.

The checks, in order: the configuration parses; the database is reachable and migrated;
each model endpoint answers (the main one and each fallback: its window, whether it
streams, whether it takes tools); each lane with a token has it accepted (the lane's own
check, `LaneSpec.check`); each MCP server starts and lists its tools. Each waits at most
`CHECK_SECONDS`, and the slow ones run side by side. Nothing is changed: no migration runs,
no SQLite file is created, nothing is sent to anyone. The exit status is 1 when a check
failed, 0 otherwise (a warning, such as migrations still to apply, is not a failure).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from bot import lanes
from bot.config import EndpointSettings, Settings, load_settings
from bot.errors import ChorusError, ProviderError, error_line
from bot.lanes import CHECK_SECONDS, Finding
from bot.providers.base import ChatProvider, ChatRequest, TextDelta

MARKS = {"ok": "ok", "warn": "warn", "fail": "FAIL"}
# The one tool the model check offers: a server that refuses tools says so to this request.
PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The current time.",
        "parameters": {"type": "object", "properties": {}},
    },
}
PROBE = "Count from one to five, in words."
PROBE_REPLY_TOKENS = 32


@dataclass(frozen=True)
class Line:
    check: str
    finding: Finding

    def render(self, width: int) -> str:
        line = f"{MARKS[self.finding.status]:<4}  {self.check:<{width}}  {self.finding.text}"
        return f"{line} — {self.finding.fix}" if self.finding.fix else line


def doctor(config: str | None) -> int:
    """Run every check, print its line, and return the exit status."""
    return asyncio.run(_doctor(config))


async def _doctor(config: str | None) -> int:
    try:
        settings = load_settings(config)
    except ChorusError as error:
        _print([Line("config", Finding("fail", str(error), "fix the setting it names, then run this again"))])
        return 1
    first = [Line("config", _config_finding(settings, config)), Line("database", _database_finding(settings))]
    checks: list[tuple[str, Awaitable[Finding]]] = [
        *_model_checks(settings),
        *_lane_checks(settings),
        *await _mcp_checks(settings),
    ]
    findings = await asyncio.gather(*(_within_deadline(check) for _, check in checks))
    shown = first + [Line(name, finding) for (name, _), finding in zip(checks, findings, strict=True)]
    _print(shown)
    return 1 if any(line.finding.status == "fail" for line in shown) else 0


def _print(shown: list[Line]) -> None:
    width = max(len(line.check) for line in shown)
    for line in shown:
        print(line.render(width))


async def _within_deadline(check: Awaitable[Finding]) -> Finding:
    try:
        return await asyncio.wait_for(check, CHECK_SECONDS * 2)
    except TimeoutError:
        return Finding(
            "fail", f"no answer within {CHECK_SECONDS * 2:.0f} s", "check that it runs and is reachable"
        )


# --- configuration and database ------------------------------------------------------


def _config_finding(settings: Settings, config: str | None) -> Finding:
    path = Path(config) if config else None
    source = str(path) if path is not None and path.exists() else "defaults and CHORUS_* variables"
    return Finding(
        "ok",
        f"{source}: {len(settings.personas)} personas (default {settings.default_persona}), "
        f"data in {settings.data_dir}",
    )


def _database_finding(settings: Settings) -> Finding:
    from sqlalchemy.exc import SQLAlchemyError

    from bot.storage import migrate
    from bot.storage.database import create_database_engine

    url = make_url(settings.database_url)
    shown = url.render_as_string(hide_password=True)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        file = Path(url.database)
        if not file.exists():
            # Connecting would create it: say what the first start will do instead.
            folder = next((parent for parent in file.parents if parent.exists()), Path("."))
            if not _writable(folder):
                return Finding(
                    "fail", f"{shown}: {folder} is not writable", "set database_url to a writable path"
                )
            return Finding("warn", f"{shown} does not exist yet", "`chorus serve` creates and migrates it")
    try:
        database = create_database_engine(settings.database_url)
    except (SQLAlchemyError, ImportError, ChorusError) as error:
        return Finding("fail", f"{shown}: {error_line(error)}", "check database_url (CHORUS_DATABASE_URL)")
    try:
        current = migrate.current_revision(database)
    except SQLAlchemyError as error:
        return Finding(
            "fail",
            f"{shown} is not reachable: {error_line(getattr(error, 'orig', None) or error)}",
            "check database_url (CHORUS_DATABASE_URL) and that the server runs",
        )
    finally:
        database.dispose()
    head = migrate.head_revision()
    if current == head:
        return Finding("ok", f"{shown} reachable, at revision {head} (the newest)")
    if current is None:
        return Finding(
            "warn",
            f"{shown} reachable, no tables yet",
            "`chorus serve` (or `chorus db upgrade`) creates them",
        )
    if current > head:
        return Finding(
            "fail",
            f"{shown} is at revision {current}, newer than this Chorus knows ({head})",
            "run the Chorus version that migrated it, or a newer one",
        )
    return Finding(
        "warn",
        f"{shown} is at revision {current}, {head} is the newest",
        "run `chorus db upgrade` (every start applies them too)",
    )


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK)


# --- the model -----------------------------------------------------------------------


def _model_checks(settings: Settings) -> list[tuple[str, Awaitable[Finding]]]:
    model = settings.model
    if not model.base_url and model.provider != "anthropic":
        return [
            (
                "model",
                _ready(
                    Finding(
                        "warn",
                        "no model configured: the offline demo model answers",
                        "set CHORUS_MODEL_BASE_URL (and CHORUS_MODEL_API_KEY) to use a real one",
                    )
                ),
            )
        ]
    checks: list[tuple[str, Awaitable[Finding]]] = [("model", _endpoint_finding(settings, model, model.name))]
    for number, fallback in enumerate(model.fallbacks, start=1):
        checks.append(
            (f"fallback {number}", _endpoint_finding(settings, fallback, fallback.name or model.name))
        )
    return checks


async def _ready(finding: Finding) -> Finding:
    return finding


async def _endpoint_finding(settings: Settings, endpoint: EndpointSettings, model: str) -> Finding:
    """Ask the endpoint once, streamed, with one tool: does it answer, stream, take tools?"""
    from bot.providers.router import endpoint_url, provider_for

    where = endpoint_url(endpoint, "model")
    keys = endpoint.keys()
    provider = provider_for(
        endpoint.provider,
        where,
        keys[0],
        {"connect_timeout": CHECK_SECONDS, "read_timeout": CHECK_SECONDS, "max_retries": 0},
    )
    try:
        window = await _window(settings, provider, model)
        pieces = 0
        request = ChatRequest(
            messages=[{"role": "user", "content": PROBE}],
            model=model,
            max_tokens=PROBE_REPLY_TOKENS,
            tools=(PROBE_TOOL,),
        )
        async for event in provider.stream(request):
            pieces += isinstance(event, TextDelta)
    except ProviderError as error:
        return Finding(
            "fail",
            f"{model} at {where} did not answer: {error_line(error)}",
            "check model.base_url, model.name and the key (CHORUS_MODEL_BASE_URL, CHORUS_MODEL_API_KEY)",
        )
    finally:
        await provider.aclose()
    streams = "streams" if pieces > 1 else "answers in one piece (does not stream)"
    tools = "takes tools" if provider.accepts_tools(model) else "refuses tools (asked without them)"
    return Finding("ok", f"{model} at {where} answers: window {window}, {streams}, {tools}")


async def _window(settings: Settings, provider: ChatProvider, model: str) -> str:
    configured = settings.model.context_windows.get(model) or settings.model.context_window
    entry = next((item for item in settings.models if item.model == model and item.context_window), None)
    if entry is not None and entry.context_window:
        configured = entry.context_window
    if configured:
        return f"{configured:,} (configured)"
    stated = await provider.discover_window(model)
    if stated:
        return f"{stated:,} (stated by the server)"
    from bot.windows import DEFAULT_WINDOW

    return f"not stated ({DEFAULT_WINDOW:,} assumed until an overflow teaches it)"


# --- lanes and MCP servers -----------------------------------------------------------


def _lane_checks(settings: Settings) -> list[tuple[str, Awaitable[Finding]]]:
    checks: list[tuple[str, Awaitable[Finding]]] = []
    for spec in lanes.lanes():
        lane_settings = getattr(settings.channels, spec.name)
        if spec.check_path is not None and lane_settings.is_active():
            checks.append((spec.name, _lane_finding(spec, lane_settings)))
    return checks


async def _lane_finding(spec: lanes.LaneSpec, lane_settings: Any) -> Finding:
    found = await spec.check(lane_settings)
    return found if found is not None else Finding("ok", "no check")


async def _mcp_checks(settings: Settings) -> list[tuple[str, Awaitable[Finding]]]:
    if not settings.tools.mcp_servers:
        return []
    from bot.tools.mcp.servers import McpServers

    servers = McpServers(settings.tools)
    servers.start()
    # A server still starting by then is reported as it stands.
    with suppress(TimeoutError):
        await asyncio.wait_for(servers.settled(), CHECK_SECONDS * 2)
    statuses = servers.health()
    await servers.aclose()
    checks: list[tuple[str, Awaitable[Finding]]] = []
    for status in statuses:
        if status.state == "ready":
            finding = Finding("ok", f"started ({status.transport}), {len(status.tools)} tools")
        else:
            finding = Finding(
                "fail",
                f"did not start ({status.transport}): {status.last_error or status.state}",
                f"check tools.mcp_servers.{status.name} (its command, URL or environment)",
            )
        checks.append((f"mcp {status.name}", _ready(finding)))
    return checks
