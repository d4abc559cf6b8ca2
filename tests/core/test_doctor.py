"""`chorus doctor` against the local stand-ins: all well, then each part failing in turn.

The model is the OpenAI-compatible stand-in, Telegram the Bot API stand-in, Discord the
REST and gateway stand-in, the MCP server npm's reference filesystem server; the doctor is
the real command in its own process, as an operator runs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.cli import main
from tests.discord.fake_discord import VALID_TOKEN, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, HttpError, refused_url
from tests.support.runtime import REPO_CONFIG
from tests.telegram.bot_api_server import BOT_USERNAME, TOKEN, FakeBotAPI
from tests.tools.mcp_support import npm_server

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 120.0


@dataclass
class Peers:
    model: FakeOpenAI
    telegram: FakeBotAPI
    discord: FakeDiscord


@pytest.fixture
async def peers(fake_openai: FakeOpenAI) -> AsyncIterator[Peers]:
    async with FakeBotAPI() as telegram, FakeDiscord() as discord:
        yield Peers(fake_openai, telegram, discord)


def healthy(tmp_path: Path, peers: Peers) -> dict[str, str]:
    """Settings under which every check passes: a migrated database, every lane, one MCP server."""
    folder = tmp_path / "files"
    folder.mkdir(exist_ok=True)
    database = f"sqlite:///{tmp_path / 'chorus.db'}"
    return {
        "CHORUS_DATABASE_URL": database,
        "CHORUS_DATA_DIR": str(tmp_path / "data"),
        "CHORUS_MODEL_BASE_URL": peers.model.base_url,
        "CHORUS_TELEGRAM_TOKEN": TOKEN,
        "CHORUS_CHANNELS_TELEGRAM_API_BASE": peers.telegram.base_url,
        "CHORUS_DISCORD_TOKEN": VALID_TOKEN,
        "CHORUS_CHANNELS_DISCORD_API_BASE": peers.discord.api_base,
        "CHORUS_CHANNELS_DISCORD_GATEWAY_URL": peers.discord.gateway_url,
        "CHORUS_TOOLS_MCP_SERVERS": json.dumps({"files": npm_server("filesystem", str(folder))}),
    }


async def doctor(settings: dict[str, str], config: Path = REPO_CONFIG) -> tuple[int, list[str]]:
    """`chorus doctor` in its own process, while this test's loop serves the stand-ins."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
    environment.update(settings)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "bot.cli", "--config", str(config), "doctor"),
        cwd=ROOT,
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), DEADLINE)
    # Its lines only: no log records (stderr may carry what an MCP server itself prints).
    assert not re.search(r" (INFO|WARNING|ERROR) (bot|channels)\.", err.decode()), err.decode()
    assert process.returncode is not None
    return process.returncode, out.decode().splitlines()


def line_of(lines: list[str], check: str) -> str:
    found = [line for line in lines if line.split("  ", 1)[-1].lstrip().startswith(check)]
    assert len(found) == 1, (check, lines)
    return found[0]


def migrated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORUS_DATABASE_URL", f"sqlite:///{tmp_path / 'chorus.db'}")
    monkeypatch.setenv("CHORUS_CONFIG", str(tmp_path / "none.yaml"))
    assert main(["db", "upgrade"]) == 0


async def test_all_is_well_one_line_per_check_and_status_zero(
    tmp_path: Path, peers: Peers, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrated(tmp_path, monkeypatch)

    status, lines = await doctor(healthy(tmp_path, peers))

    assert status == 0, lines
    assert [line.split()[0] for line in lines] == ["ok"] * 6, lines
    assert "3 personas" in line_of(lines, "config")
    assert "at revision" in line_of(lines, "database") and "(the newest)" in line_of(lines, "database")
    model = line_of(lines, "model")
    assert f"gpt-4o-mini at {peers.model.base_url} answers" in model
    assert "streams" in model and "takes tools" in model and "128,000 assumed" in model
    assert f"token accepted: @{BOT_USERNAME}" in line_of(lines, "telegram")
    assert "token accepted: " in line_of(lines, "discord")
    assert "started (stdio)" in line_of(lines, "mcp files") and " tools" in line_of(lines, "mcp files")
    # The model was asked once, streamed, with a tool; Telegram getMe; Discord /users/@me.
    (asked,) = [request.json for request in peers.model.requests]
    assert asked["stream"] is True and asked["tools"]
    assert [call.method for call in peers.telegram.calls] == ["getMe"]
    assert [call.path for call in peers.discord.calls] == ["/users/@me"]


async def test_a_model_that_refuses_tools_is_told(
    tmp_path: Path, peers: Peers, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrated(tmp_path, monkeypatch)
    peers.model.script(HttpError(400, {"error": {"message": "tools is not supported by this model"}}))

    status, lines = await doctor(healthy(tmp_path, peers))

    assert status == 0, lines
    assert "refuses tools" in line_of(lines, "model")


FAILURES = {
    "model": {"CHORUS_MODEL_BASE_URL": refused_url()},
    "telegram": {"CHORUS_TELEGRAM_TOKEN": "999999:not-the-token"},
    "discord": {"CHORUS_DISCORD_TOKEN": "not-the-token"},
    "mcp files": {"CHORUS_TOOLS_MCP_SERVERS": json.dumps({"files": {"command": "/nonexistent/mcp-server"}})},
    "database": {"CHORUS_DATABASE_URL": "postgresql://chorus:chorus@127.0.0.1:9/chorus"},
}
WHAT_TO_DO = {
    "model": "check model.base_url",
    "telegram": "CHORUS_TELEGRAM_TOKEN",
    "discord": "CHORUS_DISCORD_TOKEN",
    "mcp files": "tools.mcp_servers.files",
    "database": "check database_url",
}


@pytest.mark.parametrize("failing", sorted(FAILURES))
async def test_each_failing_check_is_its_line_with_what_to_do_and_status_one(
    tmp_path: Path, peers: Peers, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    migrated(tmp_path, monkeypatch)

    status, lines = await doctor({**healthy(tmp_path, peers), **FAILURES[failing]})

    assert status == 1, lines
    failed = [line for line in lines if line.startswith("FAIL")]
    assert failed == [line_of(lines, failing)], lines
    assert WHAT_TO_DO[failing] in failed[0].split(" — ", 1)[1]


async def test_a_configuration_that_does_not_parse_is_a_failing_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("model: [unclosed\n", encoding="utf-8")

    status, lines = await doctor({"CHORUS_DATABASE_URL": f"sqlite:///{tmp_path / 'chorus.db'}"}, config)

    assert status == 1
    assert lines[0].startswith("FAIL  config") and "not valid YAML" in lines[0]


async def test_a_database_not_yet_created_is_a_warning_and_nothing_is_created(tmp_path: Path) -> None:
    status, lines = await doctor(
        {"CHORUS_DATABASE_URL": f"sqlite:///{tmp_path / 'chorus.db'}", "CHORUS_DATA_DIR": str(tmp_path)}
    )

    assert status == 0, lines
    assert line_of(lines, "database").startswith("warn") and "does not exist yet" in line_of(
        lines, "database"
    )
    assert line_of(lines, "model").startswith("warn") and "offline demo model" in line_of(lines, "model")
    assert not (tmp_path / "chorus.db").exists()
