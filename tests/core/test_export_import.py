"""`chorus export` / `chorus import` and the database commands, through the CLI."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from bot.cli import main
from bot.runtime import Runtime
from bot.storage.message_rows import decode_blocks
from tests.fakes.anthropic_server import Answer, FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.files import png_image
from tests.support.runtime import attachment, inbound, make_runtime, make_settings


def cli_env(tmp_path, monkeypatch):
    settings = make_settings(tmp_path)
    monkeypatch.setenv("CHORUS_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("CHORUS_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("CHORUS_CONFIG", str(tmp_path / "missing.yaml"))


async def make_conversation(tmp_path) -> str:
    runtime = make_runtime(tmp_path)
    engine = runtime.engine
    photo = attachment("cat.png", "image/png", png_image(), kind="image")
    notes = attachment("notes.md", "text/markdown", "Ünïcode notes: ship Friday".encode())
    await engine.respond(inbound("hello", attachments=(photo, notes)))
    await engine.respond(inbound("/persona sage"))
    reply = await engine.respond(inbound("what did I send?"))
    await runtime.aclose()
    return reply.session_id


MESSAGE_FIELDS = (
    "seq",
    "role",
    "content",
    "persona_id",
    "sender_id",
    "sender_name",
    "lane",
    "platform_chat_id",
    "platform_message_id",
    "token_count",
    "status",
    "created_at",
    "kind",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "model",
    "prompt_tokens",
    "cached_tokens",
    "cache_write_tokens",
)
ATTACHMENT_FIELDS = ("kind", "filename", "mime_type", "size", "sha256", "text")


def stored_transcript(runtime: Runtime, session_id: str) -> dict[str, Any]:
    """What the database and the data directory hold for a session, without its ids."""
    stores = runtime.stores
    session = stores.sessions.find_session(session_id)
    assert session is not None
    messages = stores.messages.messages(session.id)
    files = stores.messages.attachments_for(m.id for m in messages if m.id is not None)
    seq_of = {m.id: m.seq for m in messages}
    return {
        "session": (session.kind, session.owner_kind, session.persona_id, session.title),
        "messages": [
            {
                **{name: getattr(m, name) for name in MESSAGE_FIELDS},
                "provider_blocks": decode_blocks(m.provider_blocks),
                "reply_to_seq": seq_of.get(m.reply_to_id),
                "attachments": [
                    {
                        **{name: getattr(item, name) for name in ATTACHMENT_FIELDS},
                        "bytes": runtime.engine.attachments.path_of(item.path).read_bytes(),
                    }
                    for item in files.get(m.id or 0, [])
                ],
            }
            for m in messages
        ],
    }


def export_and_import(tmp_path, monkeypatch, capsys, session_id: str) -> tuple[Path, str]:
    """`chorus export` here, then `chorus import` into another install (its own database and files)."""
    cli_env(tmp_path, monkeypatch)
    exported = tmp_path / "export.json"
    assert main(["export", session_id, "--format", "json", "-o", str(exported)]) == 0
    cli_env(tmp_path / "elsewhere", monkeypatch)
    assert main(["import", str(exported)]) == 0
    return exported, capsys.readouterr().out.split("Imported as session ")[1].split()[0]


def assert_imported_as(tmp_path, imported_id: str, expected: dict[str, Any]) -> None:
    imported = make_runtime(tmp_path / "elsewhere")
    try:
        assert stored_transcript(imported, imported_id) == expected
    finally:
        asyncio.run(imported.aclose())


def test_an_imported_export_stores_what_was_stored(tmp_path, monkeypatch, capsys):
    session_id = asyncio.run(make_conversation(tmp_path))
    original = make_runtime(tmp_path)
    expected = stored_transcript(original, session_id)
    asyncio.run(original.aclose())
    assert [m["role"] for m in expected["messages"]] == [
        "user",
        "assistant",
        "system",
        "system",
        "system",
        "user",
        "assistant",
    ]
    assert [m["reply_to_seq"] for m in expected["messages"] if m["role"] == "assistant"] == [1, 6]
    assert [item["filename"] for item in expected["messages"][0]["attachments"]] == ["cat.png", "notes.md"]
    _, imported_id = export_and_import(tmp_path, monkeypatch, capsys, session_id[:8])

    assert_imported_as(tmp_path, imported_id, expected)


def test_markdown_export_names_personas_and_attachments(tmp_path, monkeypatch, capsys):
    session_id = asyncio.run(make_conversation(tmp_path))
    cli_env(tmp_path, monkeypatch)
    assert main(["export", session_id, "--format", "md"]) == 0
    text = capsys.readouterr().out
    assert "[persona: ada]" in text and "[persona: sage]" in text
    assert "📎 image: cat.png" in text
    assert "persona switched from ada to sage" in text


def test_import_of_a_non_export_is_a_clear_error(tmp_path, monkeypatch, capsys):
    cli_env(tmp_path, monkeypatch)
    bogus = tmp_path / "bogus.json"
    bogus.write_text('{"hello": 1}')
    assert main(["import", str(bogus)]) == 2
    assert "not a Chorus transcript export" in capsys.readouterr().err


def test_db_upgrade_and_sessions(tmp_path, monkeypatch, capsys):
    cli_env(tmp_path, monkeypatch)
    assert main(["db", "upgrade"]) == 0
    assert "Database is at revision" in capsys.readouterr().out
    assert main(["sessions"]) == 0
    assert "No sessions yet." in capsys.readouterr().out


async def test_sessions_lists_each_conversations_lanes_and_people(tmp_path, monkeypatch, capsys):
    cli_env(tmp_path, monkeypatch)
    runtime = make_runtime(tmp_path)
    try:
        await runtime.engine.respond(inbound("hello", lane="telegram", user_id="7", display_name="Grace"))
        group = {"chat_id": "g1", "chat_kind": "group", "was_mentioned": True}
        await runtime.engine.respond(inbound("hi all", lane="discord", user_id="9", **group))
    finally:
        await runtime.aclose()

    assert main(["sessions"]) == 0

    lines = capsys.readouterr().out.splitlines()
    private = next(line for line in lines if " private " in line)
    group = next(line for line in lines if " group " in line)
    assert "lanes=telegram" in private and "people=Grace (telegram)" in private
    assert "lanes=discord" in group and "people=discord g1" in group


def first_version_export(messages: list[dict[str, object]]) -> dict[str, object]:
    """An export as Chorus wrote it before rows had a kind (version 1)."""
    return {
        "format": "chorus-transcript",
        "version": 1,
        "session": {"id": "old", "kind": "private", "owner_kind": "person", "persona_id": "ada"},
        "messages": [
            {"seq": seq, "created_at": "2025-01-02T03:04:05+00:00", **message}
            for seq, message in enumerate(messages, 1)
        ],
    }


def imported_rows(tmp_path, capsys) -> list[tuple[str, str, str]]:
    imported_id = capsys.readouterr().out.split("Imported as session ")[1].split()[0]
    runtime = make_runtime(tmp_path)
    try:
        return [(m.role, m.kind, m.content) for m in runtime.stores.messages.messages(imported_id)]
    finally:
        asyncio.run(runtime.aclose())


def test_an_export_from_before_kinds_imports_with_its_events_named(tmp_path, monkeypatch, capsys):
    cli_env(tmp_path, monkeypatch)
    old = tmp_path / "old.json"
    document = first_version_export(
        [
            {"role": "user", "content": "command: is how I start a note"},
            {"role": "system", "content": "command: /persona sage", "sender_name": "Ada"},
            {"role": "system", "content": "persona switched from ada to sage", "persona_id": "sage"},
            {"role": "system", "content": "command reply: Switched to Sage."},
            {"role": "system", "content": "error: The model could not be reached."},
            {"role": "system", "content": "something else happened"},
        ]
    )
    old.write_text(json.dumps(document))
    assert main(["import", str(old)]) == 0
    assert imported_rows(tmp_path, capsys) == [
        ("user", "message", "command: is how I start a note"),
        ("system", "command", "/persona sage"),
        ("system", "persona_switch", "persona switched from ada to sage"),
        ("system", "command_reply", "Switched to Sage."),
        ("system", "error", "The model could not be reached."),
        ("system", "note", "something else happened"),
    ]


def test_an_export_names_each_rows_kind_and_an_unknown_kind_is_a_clear_error(tmp_path, monkeypatch, capsys):
    session_id = asyncio.run(make_conversation(tmp_path))
    cli_env(tmp_path, monkeypatch)
    exported = tmp_path / "export.json"
    assert main(["export", session_id, "--format", "json", "-o", str(exported)]) == 0
    document = json.loads(exported.read_text())
    assert [m["kind"] for m in document["messages"]][:5] == [
        "message",
        "message",
        "command",
        "persona_switch",
        "command_reply",
    ]
    assert main(["export", session_id, "--format", "md"]) == 0
    markdown = capsys.readouterr().out
    assert "### event: command · #3" in markdown and "\n/persona sage\n" in markdown
    document["messages"][2]["kind"] = "voice_note"
    exported.write_text(json.dumps(document))
    assert main(["import", str(exported)]) == 2
    assert "Message 3 of the export: unknown message kind 'voice_note'" in capsys.readouterr().err
    # Nothing of the refused file was stored.
    runtime = make_runtime(tmp_path)
    try:
        assert [chat.id for chat, _ in runtime.stores.sessions.list_sessions()] == [session_id]
    finally:
        asyncio.run(runtime.aclose())


async def make_tool_conversation(tmp_path) -> str:
    """The offline demo model answers "what did I say about …" by calling `recall`."""
    runtime = make_runtime(tmp_path)
    await runtime.engine.respond(inbound("my cat is called Miso"))
    reply = await runtime.engine.respond(inbound("what did I say about my cat?"))
    await runtime.aclose()
    return reply.session_id


def test_tool_calls_and_results_survive_export_and_import(tmp_path, monkeypatch, capsys):
    session_id = asyncio.run(make_tool_conversation(tmp_path))
    original = make_runtime(tmp_path)
    expected = stored_transcript(original, session_id)
    asyncio.run(original.aclose())
    kinds = [m["kind"] for m in expected["messages"]]
    assert kinds == ["message", "message", "message", "tool_call", "tool_result", "message"]

    exported, imported_id = export_and_import(tmp_path, monkeypatch, capsys, session_id)

    document = json.loads(exported.read_text())
    assert document["version"] == 3
    [call] = document["messages"][3]["tool_calls"]
    assert call["name"] == "recall" and json.loads(call["arguments"]) == {"query": "my cat"}
    assert document["messages"][4]["tool_call_id"] == call["id"]
    assert_imported_as(tmp_path, imported_id, expected)


def test_markdown_export_shows_each_call_with_its_arguments_and_result(tmp_path, monkeypatch, capsys):
    session_id = asyncio.run(make_tool_conversation(tmp_path))
    cli_env(tmp_path, monkeypatch)
    assert main(["export", session_id, "--format", "md"]) == 0
    text = capsys.readouterr().out
    assert '🔧 `recall` {"query": "my cat"}' in text
    assert "### tool result: recall · #5" in text and '"query": "my cat"' in text.split("tool result")[1]


def test_an_export_from_before_tool_rows_still_imports(tmp_path, monkeypatch, capsys):
    cli_env(tmp_path, monkeypatch)
    fixture = Path(__file__).with_name("fixtures") / "transcript_v2.json"
    assert json.loads(fixture.read_text())["version"] == 2
    assert main(["import", str(fixture)]) == 0
    rows = imported_rows(tmp_path, capsys)
    assert [(role, kind) for role, kind, _ in rows] == [
        ("user", "message"),
        ("assistant", "message"),
        ("system", "command"),
        ("system", "persona_switch"),
        ("system", "command_reply"),
        ("user", "message"),
        ("assistant", "message"),
    ]
    assert rows[0][2] == "hello"


def test_a_tool_result_without_its_call_is_refused_and_nothing_is_stored(tmp_path, monkeypatch, capsys):
    session_id = asyncio.run(make_tool_conversation(tmp_path))
    cli_env(tmp_path, monkeypatch)
    exported = tmp_path / "export.json"
    assert main(["export", session_id, "--format", "json", "-o", str(exported)]) == 0
    document = json.loads(exported.read_text())
    document["messages"][4]["tool_call_id"] = None
    exported.write_text(json.dumps(document))
    assert main(["import", str(exported)]) == 2
    assert "Message 5 of the export is a tool result without its call" in capsys.readouterr().err
    runtime = make_runtime(tmp_path)
    try:
        assert [chat.id for chat, _ in runtime.stores.sessions.list_sessions()] == [session_id]
    finally:
        asyncio.run(runtime.aclose())


async def make_anthropic_conversation(tmp_path) -> str:
    """A tool round on Anthropic with thinking on: its signed thinking and billed tokens are stored."""
    async with FakeAnthropic() as server:
        runtime = make_runtime(
            tmp_path,
            model_provider="anthropic",
            model_base_url=server.base_url,
            model_api_key="sk-ant-test",
            model_name="claude-test",
            models=[{"name": "claude", "provider": "anthropic", "model": "claude-test", "thinking": True}],
            memory_enabled=False,
        )
        await runtime.engine.respond(inbound("/think high"))
        server.script(
            Answer(thinking="Look at the context first.", tool_calls=[("context_inspect", {})]),
            Answer(thinking="Now I can answer.", text="All clear."),
        )
        reply = await runtime.engine.respond(inbound("how full is the context?"))
        assert reply.text == "All clear."
        await runtime.aclose()
    return reply.session_id


def test_provider_blocks_and_billed_tokens_survive_export_and_import(tmp_path, monkeypatch, capsys):
    session_id = asyncio.run(make_anthropic_conversation(tmp_path))
    original = make_runtime(tmp_path)
    expected = stored_transcript(original, session_id)
    original_rows = original.stores.messages.rows_after(session_id, 0)
    asyncio.run(original.aclose())
    (call_row,) = [m for m in expected["messages"] if m["kind"] == "tool_call"]
    assert [block["type"] for block in call_row["provider_blocks"]["blocks"]] == ["thinking", "tool_use"]
    assert call_row["provider_blocks"]["blocks"][0]["signature"]
    assert any(m["prompt_tokens"] for m in expected["messages"])

    exported, imported_id = export_and_import(tmp_path, monkeypatch, capsys, session_id)

    assert_imported_as(tmp_path, imported_id, expected)
    imported = make_runtime(tmp_path / "elsewhere")
    try:
        # The rows a next turn builds its history from: the tool round replays its signed thinking.
        assert imported.stores.messages.rows_after(imported_id, 0) == original_rows
    finally:
        asyncio.run(imported.aclose())
    again = tmp_path / "again.json"
    assert main(["export", imported_id, "--format", "json", "-o", str(again)]) == 0
    first, second = json.loads(exported.read_text()), json.loads(again.read_text())
    # A new session (its own id and start); every message exactly as exported.
    assert first.pop("session")["id"] != second.pop("session")["id"]
    assert first == second


# What Gemini 3's OpenAI-compatible endpoint signs a call with.
SIGNED = {"google": {"thought_signature": "c2lnbmVkIGZvciB0aGlzIGNhbGw="}}


async def make_signed_call_conversation(tmp_path) -> str:
    """A tool round on an OpenAI-compatible server that signs its call in `extra_content`."""
    async with FakeOpenAI() as server:
        runtime = make_runtime(
            tmp_path, model_base_url=server.base_url, model_name="gemini-3-pro-preview", memory_enabled=False
        )
        server.script(ToolCalls([("context_inspect", {})], extra_content=(SIGNED,)), "All clear.")
        reply = await runtime.engine.respond(inbound("how full is the context?"))
        assert reply.text == "All clear."
        await runtime.aclose()
    return reply.session_id


def test_a_calls_extra_content_survives_export_and_import(tmp_path, monkeypatch, capsys):
    session_id = asyncio.run(make_signed_call_conversation(tmp_path))
    original = make_runtime(tmp_path)
    original_rows = original.stores.messages.rows_after(session_id, 0)
    asyncio.run(original.aclose())

    _, imported_id = export_and_import(tmp_path, monkeypatch, capsys, session_id)

    imported = make_runtime(tmp_path / "elsewhere")
    try:
        rows = imported.stores.messages.rows_after(imported_id, 0)
    finally:
        asyncio.run(imported.aclose())
    # The rows a next turn builds its history from: the call goes back with its signature.
    assert rows == original_rows
    (call_row,) = [row for row in rows if row.tool_calls]
    assert call_row.provider_blocks == {
        "provider": "openai",
        "blocks": [
            {
                "tool_call_id": "call_0_context_inspect",
                "model": "gemini-3-pro-preview",
                "extra_content": SIGNED,
            }
        ],
    }
