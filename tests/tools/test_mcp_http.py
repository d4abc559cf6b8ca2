"""MCP servers over HTTP: the SDK's own server as a process on 127.0.0.1, killed and restarted."""

from __future__ import annotations

import logging

from tests.durable.serve_process import wait_until
from tests.tools.mcp_support import call, registry_of, serve, tool_settings

TOKEN = "s3cret-bearer-for-the-test-server"


async def test_a_bearer_token_from_the_environment_reaches_the_server_and_is_never_shown(
    http_servers, start_servers, tmp_path, monkeypatch, caplog
):
    caplog.set_level(logging.DEBUG)
    server = await serve(http_servers, tmp_path, token=TOKEN)
    monkeypatch.setenv("TEST_MCP_TOKEN", TOKEN)
    monkeypatch.setenv("WRONG_MCP_TOKEN", "a-wrong-token-that-must-stay-hidden")
    servers = await start_servers(
        tool_settings(
            good={"url": server.url, "headers": {"Authorization": "Bearer ${TEST_MCP_TOKEN}"}},
            bad={"url": server.url, "headers": {"Authorization": "Bearer ${WRONG_MCP_TOKEN}"}},
        )
    )
    states = {status.name: status for status in servers.health()}
    assert states["good"].state == "ready" and "good__echo" in states["good"].tools
    assert states["bad"].state == "down" and "401" in (states["bad"].last_error or "")
    settings = tool_settings(good={"url": server.url})
    assert (await call(registry_of(servers, settings), "good__echo", text="hi")).content == "hi"

    shown = (
        caplog.text
        + repr(servers.health())
        + repr(tool_settings(bad={"url": server.url, "headers": {"A": TOKEN}}))
    )
    assert TOKEN not in shown and "a-wrong-token-that-must-stay-hidden" not in shown


async def test_a_server_killed_mid_conversation_fails_one_call_clearly_and_serves_after_its_restart(
    http_servers, start_servers, tmp_path
):
    server = await serve(http_servers, tmp_path)
    settings = tool_settings(web={"url": server.url})
    servers = await start_servers(settings)
    registry = registry_of(servers, settings)
    first_pid = int((await call(registry, "web__process_id")).content)

    server.kill()
    failed = await call(registry, "web__echo", text="are you there?")
    assert failed.is_error
    assert "The MCP server web stopped answering" in failed.content
    assert "web__echo" in [tool.name for tool in registry.all()], "its tools stay offered while it is down"
    status = servers.health()[0]
    assert status.state == "down" and status.last_error

    await server.start()
    connection = servers.connections[0]
    # Restarted in the background after the backoff (again, while the server was still away).
    await wait_until(lambda: connection.state == "ready", what="the restart in the background")
    second_pid = int((await call(registry, "web__process_id")).content)
    assert second_pid != first_pid
    assert servers.health()[0].restarts >= 1


async def test_a_tool_added_at_run_time_is_offered_without_a_restart(http_servers, start_servers, tmp_path):
    server = await serve(http_servers, tmp_path)
    settings = tool_settings(web={"url": server.url})
    servers = await start_servers(settings)
    registry = registry_of(servers, settings)
    assert "web__late_arrival" not in [tool.name for tool in registry.all()]

    assert (await call(registry, "web__add_tool", name="late_arrival")).content == "added late_arrival"
    await wait_until(
        lambda: "web__late_arrival" in [tool.name for tool in registry.all()],
        what="the list_changed notification",
    )
    assert (await call(registry, "web__late_arrival")).content == "late_arrival ran"
    assert servers.health()[0].restarts == 0


async def test_the_legacy_sse_transport(http_servers, start_servers, tmp_path):
    server = await serve(http_servers, tmp_path, sse=True)
    settings = tool_settings(old={"transport": "sse", "url": server.url})
    servers = await start_servers(settings)
    registry = registry_of(servers, settings)
    assert servers.health()[0].state == "ready"
    assert (await call(registry, "old__echo", text="over sse")).content == "over sse"
