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
