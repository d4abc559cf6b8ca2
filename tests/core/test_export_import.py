"""`chorus export` / `chorus import` and the database commands, through the CLI."""

from __future__ import annotations

import asyncio
import json

from bot.cli import main
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


def test_export_import_export_is_lossless(tmp_path, monkeypatch, capsys):
    session_id = asyncio.run(make_conversation(tmp_path))
    cli_env(tmp_path, monkeypatch)
    first_file = tmp_path / "first.json"
    assert main(["export", session_id[:8], "--format", "json", "-o", str(first_file)]) == 0
    first = json.loads(first_file.read_text())
    assert [m["role"] for m in first["messages"]] == [
        "user",
        "assistant",
        "system",
        "system",
        "system",
        "user",
        "assistant",
    ]
    assert [m["persona_id"] for m in first["messages"] if m["role"] == "assistant"] == ["ada", "sage"]
    assert first["messages"][0]["attachments"][1]["text"] == "Ünïcode notes: ship Friday"

    assert main(["import", str(first_file)]) == 0
    imported_id = capsys.readouterr().out.split("Imported as session ")[1].split()[0]
    second_file = tmp_path / "second.json"
    assert main(["export", imported_id, "--format", "json", "-o", str(second_file)]) == 0
    second = json.loads(second_file.read_text())
    assert second["session"].pop("id") == imported_id
    first["session"].pop("id")
    second["session"].pop("created_at")
    first["session"].pop("created_at")
    assert second == first


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
