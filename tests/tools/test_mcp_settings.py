"""MCP settings, secrets from the environment, tool names and policy, and results, without a server."""

from __future__ import annotations

import base64

import mcp_types as types
import pytest

from bot.config import ToolSettings, load_settings
from bot.errors import ConfigError
from bot.tools.mcp.expansion import Secrets
from bot.tools.mcp.sdk import to_result, validator
from bot.tools.mcp.tool import ListedTool, offered_name, offered_tools
from bot.tools.policy import ToolPolicy
from bot.tools.registry import StaticTools, ToolRegistry
from tests.support.runtime import REPO_CONFIG


def test_servers_come_from_json_in_the_environment_and_bad_ones_name_the_setting():
    settings = load_settings(
        REPO_CONFIG,
        {
            "CHORUS_TOOLS_MCP_SERVERS": '{"time": {"command": "uvx", "args": ["mcp-server-time"]},'
            ' "docs": {"url": "https://mcp.example.org/mcp", "in_groups": true}}'
        },
    )
    servers = settings.tools.mcp_servers
    assert (servers["time"].transport, servers["time"].args) == ("stdio", ["mcp-server-time"])
    assert (servers["docs"].transport, servers["docs"].in_groups) == ("http", True)
    assert load_settings(REPO_CONFIG, {}).tools.mcp_servers == {}

    for servers_json, problem in [
        ('{"a__b": {"url": "http://x"}}', "no double underscore"),
        ('{"feed": {"transport": "sse"}}', "needs `url`"),
        ('{"both": {"command": "x", "url": "http://x"}}', "not both"),
        ('{"typo": {"comand": "x"}}', "tools.mcp_servers.typo.comand"),
    ]:
        with pytest.raises(ConfigError, match=problem):
            load_settings(REPO_CONFIG, {"CHORUS_TOOLS_MCP_SERVERS": servers_json})


def test_secrets_are_read_from_the_environment_and_masked_in_what_is_shown():
    secrets = Secrets({"TOKEN": "tok-123", "HOST": "mcp.example.org"})
    assert secrets.expand("Bearer ${TOKEN}", "headers.Authorization") == "Bearer tok-123"
    assert secrets.expand("costs $$5, not ${HOST}", "env.NOTE") == "costs $5, not mcp.example.org"
    assert secrets.mask("401 for Bearer tok-123 at mcp.example.org") == "401 for Bearer *** at ***"
    with pytest.raises(ConfigError, match=r"headers.X names \$\{MISSING\}"):
        secrets.expand("${MISSING}", "headers.X")
    # A setting's repr never shows env, headers or url (a secret may be written there).
    shown = repr(
        ToolSettings.model_validate({"mcp_servers": {"a": {"url": "http://u", "headers": {"K": "v1"}}}})
    )
    assert "v1" not in shown and "http://u" not in shown


def test_tool_names_are_prefixed_with_the_server_in_characters_models_accept():
    assert offered_name("time", "get_current_time") == "time__get_current_time"
    assert offered_name("files", "read.file/v2") == "files__read_file_v2"
    long = offered_name("search", "x" * 80)
    assert len(long) == 64 and long != offered_name("search", "x" * 81)


def listed(name: str, read_only: bool = False) -> ListedTool:
    return ListedTool(name, f"The {name} tool.", {"type": "object", "properties": {}}, read_only)


async def never(remote_name: str, arguments: dict[str, object]) -> object:
    raise AssertionError("not called")


def test_the_deployments_policy_and_the_servers_group_rule_apply_to_its_tools():
    def server_tools(server: str, **extra: object) -> StaticTools:
        settings = ToolSettings.model_validate({"mcp_servers": {server: {"command": "x", **extra}}})
        tools = offered_tools(
            server,
            settings.mcp_servers[server],
            [listed("search", read_only=True), listed("write")],
            never,  # type: ignore[arg-type]
            validator,
            set(),
        )
        return StaticTools(tools)

    policy = ToolPolicy(ToolSettings(deny=["files__write"]))
    registry = ToolRegistry([server_tools("files"), server_tools("team", in_groups=True)], policy)
    assert [tool.name for tool in registry.offered(persona_tools=None, audience="members")] == [
        "files__search", "team__search", "team__write",
    ]  # fmt: skip
    # Groups: read-only tools by default (the server's readOnlyHint); `in_groups: true` offers all.
    assert [tool.name for tool in registry.offered(persona_tools=None, audience="groups")] == [
        "files__search", "team__search", "team__write",
    ]  # fmt: skip
    assert [tool.name for tool in registry.offered(persona_tools=["team__*"], audience="members")] == [
        "team__search", "team__write",
    ]  # fmt: skip
    silent = ToolRegistry([server_tools("quiet", in_groups=False)], ToolPolicy(ToolSettings()))
    assert silent.offered(persona_tools=None, audience="groups") == []


def test_every_kind_of_content_becomes_text_an_image_or_a_placeholder():
    pixel = base64.b64encode(b"\x89PNG fake").decode()
    answer = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="first"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="file:///notes.txt", text="the notes", mime_type="text/plain"
                ),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///p.png", blob=pixel, mime_type="image/png"),
            ),
            types.ResourceLink(type="resource_link", name="report", uri="https://example.org/r"),
            types.AudioContent(type="audio", data=pixel, mime_type="audio/wav"),
            types.ImageContent(type="image", data="not base64!", mime_type="image/png"),
        ],
        structured_content={"ignored": "because text came"},
    )
    result = to_result(answer)
    assert result.content.splitlines() == [
        "first",
        "the notes",
        "[resource link: report https://example.org/r]",
        "[audio (audio/wav, 9 B), which Chorus cannot pass on]",
        "[an image that could not be read (image/png): it is not valid base64]",
    ]
    assert [(image.data, image.mime_type) for image in result.images] == [(b"\x89PNG fake", "image/png")]
    failed = to_result(types.CallToolResult(content=[], is_error=True))
    assert failed.is_error and "without saying which" in failed.content
