"""What an operator sees of MCP servers: /healthz, the console, /metrics, `chorus tools`, and
`chorus serve` starting lanes without waiting for servers and leaving no child behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio
from playwright.async_api import async_playwright
from prometheus_client.parser import text_string_to_metric_families

from bot.runtime import Runtime
from channels.web.app import create_app
from tests.admin.seed import ADMIN_TOKEN, BEARER, admin_runtime
from tests.durable.serve_process import REPO, ServeProcess
from tests.support.live_server import LiveServer
from tests.tools.mcp_support import (
    READY_SECONDS,
    call,
    npm_server,
    process_gone,
    stdio_test_server,
    time_server,
    until,
)
from tests.web.test_widget_browser import CHROMIUM, CHROMIUM_ARGS

BROKEN = {"command": "/nonexistent/mcp-server"}
# A server that never finishes its handshake: Chorus must not wait for it to serve.
SILENT = {
    "command": sys.executable,
    "args": ["-c", "import time; time.sleep(3600)"],
    "startup_timeout_seconds": 3600,
}


@pytest_asyncio.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    built = admin_runtime(tmp_path, tools_mcp_servers={"test": stdio_test_server(), "broken": BROKEN})
    built.mcp_servers.start()
    await built.mcp_servers.settled()
    yield built
    await built.aclose()


async def test_healthz_the_console_and_metrics_show_each_server(runtime: Runtime) -> None:
    async with (
        LiveServer(create_app(runtime)) as live,
        httpx.AsyncClient(base_url=live.base_url) as http,
    ):
        health = await http.get("/healthz")
        # A down MCP server does not fail the process: turns go on without its tools.
        assert health.status_code == 200
        servers = health.json()["mcp_servers"]
        assert servers["test"]["state"] == "ready" and "test__echo" in servers["test"]["tools"]
        assert servers["broken"]["state"] == "down"
        assert "No such file" in servers["broken"]["last_error"]

        console = (await http.get("/admin/api/health", headers=BEARER)).json()["mcp_servers"]
        assert [(server["name"], server["state"]) for server in console] == [
            ("test", "ready"),
            ("broken", "down"),
        ]

        metrics = (await http.get("/metrics", headers=BEARER)).text
        samples = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(metrics)
            for sample in family.samples
        }
        assert samples[("chorus_mcp_server_state", (("server", "test"), ("state", "ready")))] == 1
        assert samples[("chorus_mcp_server_state", (("server", "broken"), ("state", "down")))] == 1
        assert samples[("chorus_mcp_server_state", (("server", "broken"), ("state", "ready")))] == 0

        if Path(CHROMIUM).exists():
            await _console_lists_the_servers(live.base_url)


async def _console_lists_the_servers(base_url: str) -> None:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = await browser.new_page()
        page.set_default_timeout(READY_SECONDS * 1000)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(base_url + "/admin/login")
        await page.fill("#token", ADMIN_TOKEN)
        await page.click("button[type=submit]")
        await page.wait_for_selector("#page[data-page]:not([data-loading])")
        await page.click("[data-nav=health]")
        await page.wait_for_selector("[data-testid=mcp-servers]")
        ready = await page.inner_text("tr[data-mcp-server=test]")
        assert "ready" in ready and "test__echo" in ready
        down = await page.inner_text("tr[data-mcp-server=broken]")
        assert "down" in down and "No such file" in down
        assert errors == []
        await browser.close()


async def test_closing_the_runtime_ends_its_stdio_servers(runtime: Runtime) -> None:
    registry = runtime.tools
    pid = int((await call(registry, "test__process_id")).content)
    await runtime.aclose()
    assert process_gone(pid)
    assert {server.state for server in runtime.mcp_servers.health()} == {"stopped"}


def test_chorus_tools_lists_every_tool_with_its_source_and_policy(tmp_path: Path) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
    environment.update(
        CHORUS_DATABASE_URL=f"sqlite:///{tmp_path / 'chorus.db'}",
        CHORUS_DATA_DIR=str(tmp_path / "data"),
        CHORUS_MEMORY_DENSE="false",
        CHORUS_TOOLS_DENY='["time__convert_time"]',
        CHORUS_TOOLS_APPROVE='{"test__echo": {"members": "ask"}}',
        CHORUS_TOOLS_MCP_SERVERS=json.dumps(
            {
                "time": time_server(),
                "test": stdio_test_server(),
                "broken": BROKEN,
                # The npm reference server writes "… running on stdio" to its stderr at start.
                "graph": npm_server("memory", env={"MEMORY_FILE_PATH": str(tmp_path / "graph.json")}),
            }
        ),
    )
    command = [sys.executable, "-m", "bot.cli", "--config", str(REPO / "config.yaml"), "tools"]
    text = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=READY_SECONDS, check=True
    )
    # The listing alone: a server down is one of its lines, not a log line beside it, and what
    # a server writes to its stderr is a log record of Chorus's, quiet here.
    assert text.stderr == ""
    assert "running on stdio" not in text.stdout
    assert any(line.startswith("  graph (stdio): ready") for line in text.stdout.splitlines())
    lines = text.stdout.splitlines()
    assert lines[1].split() == ["admins", "members", "public", "groups"]
    row = next(line for line in lines if line.strip().startswith("time__get_current_time "))
    # Read-only by the server's hint: offered to the public and in groups by the default rules.
    assert "mcp:time" in row and row.split()[-4:] == ["allow", "allow", "allow", "allow"]
    assert next(line for line in lines if "time__convert_time" in line).split()[-4:] == ["deny"] * 4
    echo = next(line for line in lines if "test__echo " in line)
    assert echo.split()[-4:] == ["allow", "ask", "deny", "deny"]
    assert any(line.startswith("  broken (stdio): down") and "No such file" in line for line in lines)
    # The built-ins are listed beside the servers' tools; one that changes memory stays out of groups.
    recall = next(line for line in lines if line.strip().startswith("recall "))
    assert recall.split()[-4:] == ["allow"] * 4
    remember = next(line for line in lines if line.strip().startswith("remember "))
    assert "builtin" in remember and remember.split()[-4:] == ["allow", "allow", "deny", "deny"]

    described = json.loads(
        subprocess.run([*command, "--json"], env=environment, capture_output=True, text=True,
                       timeout=READY_SECONDS, check=True).stdout
    )  # fmt: skip
    by_name = {tool["name"]: tool for tool in described["tools"]}
    assert by_name["test__echo"]["audiences"] == {
        "admins": "allow",
        "members": "ask",
        "public": "deny",
        "groups": "deny",
    }
    assert by_name["time__convert_time"]["audiences"]["admins"] == "deny"


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


async def test_serve_starts_its_lanes_without_waiting_and_a_sigterm_leaves_no_child(tmp_path: Path) -> None:
    serve = ServeProcess(
        tmp_path,
        {"CHORUS_TOOLS_MCP_SERVERS": json.dumps({"test": stdio_test_server(), "silent": SILENT})},
    )
    try:
        await serve.start()
        async with httpx.AsyncClient(base_url=serve.url) as http:

            async def states() -> dict[str, str]:
                servers = (await http.get("/healthz")).json()["mcp_servers"]
                return {name: server["state"] for name, server in servers.items()}

            # The web lane answers while one server has not finished starting (and never will).
            assert (await states())["silent"] == "starting"
            reported = await until(states, lambda found: found["test"] == "ready", "the test server")
        assert reported["silent"] == "starting"
        assert serve.process is not None
        children = children_of(serve.process.pid)
        assert len(children) == 2, "one process per stdio server"

        serve.signal(signal.SIGTERM)
        assert await serve.wait() == 0
        assert all(process_gone(child) for child in children), serve.log()
    finally:
        serve.kill()
