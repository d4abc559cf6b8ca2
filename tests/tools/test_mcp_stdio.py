"""MCP servers over stdio as real processes: mcp-server-time from PyPI, the npm reference servers and
the SDK-built test server."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal

from bot.tools.mcp.connection import McpConnection
from tests.durable.serve_process import wait_until
from tests.tools.mcp_server import PIXEL
from tests.tools.mcp_support import (
    READY_SECONDS,
    call,
    child_pid,
    context,
    npm_server,
    process_gone,
    registry_of,
    stdio_test_server,
    time_server,
    tool_settings,
)

# What the SDK passes to every stdio server whatever the config says: nothing secret.
SDK_BASELINE = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}


async def test_time_server_from_pypi_is_offered_with_a_sendable_schema_and_answers(start_servers):
    settings = tool_settings(time=time_server())
    servers = await start_servers(settings)
    registry = registry_of(servers, settings)

    offered = {tool.name: tool for tool in registry.offered(persona_tools=None, audience="members")}
    assert sorted(offered) == ["time__convert_time", "time__get_current_time"]
    current = offered["time__get_current_time"]
    assert current.source == "mcp:time"
    # The server marks it read-only, so the default group rule offers it in groups too.
    assert current.read_only is True
    schema = current.parameters()
    assert schema["type"] == "object" and schema["required"] == ["timezone"]
    assert "title" not in json.dumps(schema)

    answer = await call(registry, "time__get_current_time", timezone="Europe/Paris")
    assert not answer.is_error
    assert json.loads(answer.content)["timezone"] == "Europe/Paris"

    refused = await call(registry, "time__get_current_time", timezone="Nowhere/Atlantis")
    assert refused.is_error and "Nowhere/Atlantis" in refused.content

    # Arguments that do not fit the server's schema are answered before the server is asked.
    misfit = await call(registry, "time__get_current_time", zone="Europe/Paris")
    assert misfit.is_error and "'timezone' is a required property" in misfit.content


async def test_results_carry_text_images_errors_and_structured_content(start_servers):
    settings = tool_settings(test=stdio_test_server())
    registry = registry_of(await start_servers(settings), settings)

    echoed = await call(registry, "test__echo", text="hello there")
    assert (echoed.content, echoed.is_error, echoed.images) == ("hello there", False, ())

    picture = await call(registry, "test__picture")
    assert picture.content == "a red pixel"
    assert [image.mime_type for image in picture.images] == ["image/png"]
    assert picture.images[0].data.startswith(b"\x89PNG")

    refused = await call(registry, "test__refuse")
    assert refused.is_error and refused.content == "the vault is locked"

    measured = await call(registry, "test__measure")
    assert json.loads(measured.content) == {"width": 3, "height": 4}


async def test_an_image_in_structured_content_alone_is_an_image_of_the_result_not_base64_text(start_servers):
    settings = tool_settings(test=stdio_test_server())
    registry = registry_of(await start_servers(settings), settings)

    answer = await call(registry, "test__structured_picture")

    assert [(image.mime_type, image.data) for image in answer.images] == [("image/png", PIXEL)]
    assert json.loads(answer.content) == {
        "content": ["[image (image/png): attached to this result]"],
        "thumbnail": "[data (image/png, 280 B), which Chorus cannot pass on]",
    }


async def test_include_and_exclude_choose_the_offered_tools_and_a_recursive_schema_is_left_out_once(
    start_servers, caplog
):
    caplog.set_level(logging.WARNING)
    settings = tool_settings(
        test=stdio_test_server(include=["echo", "pi*", "count_*", "refuse", "add_tool"], exclude=["refuse"])
    )
    servers = await start_servers(settings)
    registry = registry_of(servers, settings)
    assert [tool.name for tool in registry.all()] == ["test__add_tool", "test__echo", "test__picture"]

    # A tool added at run time that `include` does not name stays out; the list is read again
    # (list_changed over stdio), and the schema's warning is not repeated.
    assert (await call(registry, "test__add_tool", name="pinned")).content == "added pinned"
    await wait_until(lambda: "test__pinned" in [tool.name for tool in registry.all()], what="the new list")
    assert (await call(registry, "test__add_tool", name="hidden")).content == "added hidden"
    assert (await call(registry, "test__add_tool", name="pizza")).content == "added pizza"
    await wait_until(lambda: "test__pizza" in [tool.name for tool in registry.all()], what="the newer list")
    assert "test__hidden" not in [tool.name for tool in registry.all()]
    warnings = [record.getMessage() for record in caplog.records if "count_headings" in record.getMessage()]
    assert len(warnings) == 1 and "refers to itself" in warnings[0]


async def test_a_stdio_server_gets_only_the_environment_its_config_names(start_servers, monkeypatch):
    monkeypatch.setenv("CHORUS_MODEL_API_KEY", "sk-chorus-own-secret")
    monkeypatch.setenv("CHORUS_TELEGRAM_TOKEN", "123:telegram-secret")
    monkeypatch.setenv("SERVICE_TOKEN", "token-for-the-server")
    settings = tool_settings(
        test=stdio_test_server(env={"GREETING": "hello", "API_TOKEN": "${SERVICE_TOKEN}", "PRICE": "$$5"})
    )
    registry = registry_of(await start_servers(settings), settings)

    environment = json.loads((await call(registry, "test__environment")).content)
    assert environment["GREETING"] == "hello"
    assert environment["API_TOKEN"] == "token-for-the-server"
    assert environment["PRICE"] == "$5"
    assert environment["PATH"] == os.environ["PATH"]
    assert set(environment) - SDK_BASELINE <= {"GREETING", "API_TOKEN", "PRICE"} | _python_own()
    assert "sk-chorus-own-secret" not in json.dumps(environment)
    assert "SERVICE_TOKEN" not in environment


def _python_own() -> set[str]:
    """What a Python server sets in its own environment at start-up: LC_CTYPE when the
    locale is C (PEP 538). Nothing Chorus passes."""
    return {"LC_CTYPE"}


async def test_a_server_named_variable_that_is_not_set_fails_that_server_only(start_servers):
    settings = tool_settings(
        test=stdio_test_server(env={"API_TOKEN": "${NOT_SET_ANYWHERE}"}), time=time_server()
    )
    servers = await start_servers(settings)
    states = {status.name: status for status in servers.health()}
    assert states["test"].state == "down"
    assert "NOT_SET_ANYWHERE" in (states["test"].last_error or "")
    assert states["time"].state == "ready"


async def test_a_killed_stdio_server_is_seen_down_at_once_and_restarted_before_any_call(start_servers):
    """`kill -9` of mcp-server-time: no call finds out; the next call after the backoff just works."""
    settings = tool_settings(time=time_server())
    servers = await start_servers(settings)
    registry = registry_of(servers, settings)
    connection = servers.connections[0]
    first_pid = child_pid("mcp_server_time")

    os.kill(first_pid, signal.SIGKILL)
    await wait_until(lambda: connection.state == "down", what="the exit to be seen without a call")
    assert connection.last_error == "the server process exited"

    # Restarted in the background once the backoff passed: the call waits for it at most.
    await wait_until(lambda: connection.state != "down", what="the restart after the backoff")
    answer = await call(registry, "time__get_current_time", timezone="Europe/Paris")
    assert not answer.is_error and json.loads(answer.content)["timezone"] == "Europe/Paris"
    assert child_pid("mcp_server_time") != first_pid
    status = servers.health()[0]
    assert (status.state, status.restarts, status.last_error) == ("ready", 1, None)


async def test_a_call_running_when_its_npm_server_dies_gets_an_error_result_and_a_later_call_works(
    start_servers,
):
    settings = tool_settings(everything=npm_server("everything"))
    servers = await start_servers(settings)
    registry = registry_of(servers, settings)
    connection = servers.connections[0]
    running = asyncio.Event()
    slow = asyncio.create_task(
        call(
            registry,
            "everything__trigger-long-running-operation",
            on_progress=lambda _: running.set(),
            duration=600,
            steps=600,
        )
    )
    async with asyncio.timeout(READY_SECONDS):
        await running.wait()

    os.kill(child_pid("mcp-server-everything"), signal.SIGKILL)
    killed = await asyncio.wait_for(slow, READY_SECONDS)
    assert killed.is_error and "The MCP server everything stopped answering" in killed.content

    await wait_until(lambda: connection.state == "ready", what="the restart in the background")
    echoed = await call(registry, "everything__echo", message="back")
    assert echoed.content == "Echo: back"
    assert servers.health()[0].restarts == 1


async def test_a_server_that_cannot_start_is_retried_only_after_its_backoff(start_servers):
    clock = [1000.0]
    connection = McpConnection(
        "broken", tool_settings(broken={"command": "/nonexistent/mcp-server"}).mcp_servers["broken"], {},
        clock=lambda: clock[0],
    )  # fmt: skip
    try:
        connection.start()
        await connection.settled()
        status = connection.status()
        assert status.state == "down" and "No such file" in (status.last_error or "")
        assert status.retry_in_seconds == 1.0

        connection.retry_if_due()
        assert connection.status().restarts == 0
        clock[0] += 1.0
        connection.retry_if_due()
        await connection.settled()
        # The second failure doubles the wait.
        assert (connection.status().restarts, connection.status().retry_in_seconds) == (1, 2.0)
    finally:
        await connection.aclose()


async def test_closing_ends_every_stdio_child_and_their_tools_answer_that_chorus_is_closing(start_servers):
    settings = tool_settings(one=stdio_test_server(), two=stdio_test_server())
    servers = await start_servers(settings)
    registry = registry_of(servers, settings)
    pids = [int((await call(registry, f"{name}__process_id")).content) for name in ("one", "two")]
    tools = {tool.name: tool for tool in registry.all()}

    await servers.aclose()
    assert all(process_gone(pid) for pid in pids)
    assert [status.state for status in servers.health()] == ["stopped", "stopped"]
    late = await tools["one__echo"].run(context(), {"text": "hello?"})
    assert late.is_error and "shutting down" in late.content


async def test_two_processes_hold_their_own_connections(start_servers):
    """Each `chorus serve` builds its own `McpServers`: its own child, unaffected by the other's."""
    settings = tool_settings(test=stdio_test_server())
    first = registry_of(await start_servers(settings), settings)
    second_servers = await start_servers(settings)
    second = registry_of(second_servers, settings)
    first_pid = int((await call(first, "test__process_id")).content)
    second_pid = int((await call(second, "test__process_id")).content)
    assert first_pid != second_pid

    await second_servers.aclose()
    assert process_gone(second_pid) and not process_gone(first_pid)
    assert (await call(first, "test__echo", text="still here")).content == "still here"


async def test_a_slow_call_is_bounded_by_the_servers_timeout_and_the_server_stays_up(start_servers):
    settings = tool_settings(test=stdio_test_server(timeout_seconds=0.5))
    registry = registry_of(await start_servers(settings), settings)
    slow = await call(registry, "test__pause", seconds=60)
    assert slow.is_error and "did not finish within 0.5 seconds" in slow.content
    assert (await call(registry, "test__echo", text="after")).content == "after"


async def test_what_a_stdio_server_writes_to_its_stderr_is_a_log_record_naming_it(
    start_servers, caplog, tmp_path
):
    caplog.set_level(logging.INFO, logger="bot.tools.mcp.server")
    settings = tool_settings(
        graph=npm_server("memory", env={"MEMORY_FILE_PATH": str(tmp_path / "graph.json")})
    )
    await start_servers(settings)
    await wait_until(
        lambda: any("running on stdio" in record.getMessage() for record in caplog.records),
        what="the server's start-up line in the log",
    )
    line = next(record.getMessage() for record in caplog.records if "running on stdio" in record.getMessage())
    assert line.startswith("MCP server graph: ")
