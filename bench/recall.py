"""Recall benchmark: does `chorus recall -k 10` bring back the turns a question is about?

Each conversation of the development question set (bench/data/recall_questions.json) is
loaded as a group chat through the engine, as real use would: every turn is a group
message the bot was not addressed in (`TurnEngine.record`), dated with its LoCoMo session date,
so the after-turn jobs offload memory as they go; the group's idle flush runs at the end.
Each question is then asked with the same search `/recall` and `chorus recall` use, and a
hit covers the turns it came from (a message: its turn; a memory item: its source range).

Reported for the tuned part, the held-out part (whole conversations recall is never tuned
on, `held_out` in the question file) and all questions, per category: recall@10 of any
evidence turn and of all of them (and @5 overall); the search latency p50/p99 with the
query's own embedding (dense: each search embeds its question afresh, beside the full-text
search; the embedding alone is `embed ms`), index size, build time, and the wall
time of a whole `chorus recall` command (process start-up included, median of five;
each question is searched three times for the latency figures) —
for Chorus with dense recall, Chorus full-text only, and plain BM25 (rank-bm25, Okapi)
over the same turns' text. The machine's load average is printed with the table.

`--locomo-scale` also loads the other LoCoMo conversations (each its own group chat) into
the same database, so searches run against all 5,882 turns' indexes, as the ten
conversations together would; questions still ask their own group. (The full set covers
all ten conversations, so this matters only with `--conversations`.)

`--dev` measures the development set instead (`bench/data/dev/`: conversations written
for Chorus, not LoCoMo's, with questions of the same four kinds; see bench/dialogues.py):
the set recall is tuned on. LoCoMo's conversations are then not loaded, and the whole of
the LoCoMo question set stays held out from tuning.

`--postgres ADMIN_URL` runs Chorus on PostgreSQL instead of SQLite: each method records
into a fresh database on that server (dropped afterwards, unless `--keep`).

`--keep DIR` keeps each method's database in DIR and, when run again, searches the one
already there instead of recording the conversations again (the build is most of the
run's time): for changing how recall ranks, not how memory is written.

Run: .venv/bin/python bench/recall.py [--dev] [--questions FILE] [--conversations 26,30] [--locomo-scale]
     [--methods dense,full-text,bm25] [--keep DIR] [--postgres postgresql://user:pass@127.0.0.1/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (  # noqa: E402
    LOCOMO_DIR,
    drop_database,
    fresh_database,
    markdown_table,
    median,
    percentile,
)
from bench.data.check_questions import CATEGORY_SHARES  # noqa: E402
from bench.dialogues import DEV_DIR, dev_questions, read_dialogue  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.memory.dense import Embedder, RememberingEmbedder  # noqa: E402
from bot.runtime import Runtime, build_runtime  # noqa: E402
from bot.storage.memory_search import RecallHit  # noqa: E402
from bot.storage.owners import Owner  # noqa: E402
from bot.turns.inbound import Actor, InboundMessage  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = REPO / "bench" / "data" / "recall_questions.json"
KS = (5, 10)
COMMAND_RUNS = 5
# Timing runs per question: on a shared machine one slow moment should not be the p99.
REPEATS = 3
_LOCOMO_DATE = re.compile(
    r"(?P<time>\d{1,2}:\d\d\s*[ap]m) on (?P<day>\d{1,2}) (?P<month>\w+),? (?P<year>\d{4})"
)


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    said_at: datetime


Outcome = tuple[bool, bool, bool, bool]


@dataclass
class Variant:
    name: str
    build_seconds: float = 0.0
    index_bytes: int = 0
    # Search time, the query's own embedding included (dense: every search embeds afresh).
    latencies_ms: list[float] = field(default_factory=list)
    # The query's own embedding alone (dense only), part of `latencies_ms`: it runs on the
    # query thread while the full-text search runs.
    embed_ms: list[float] = field(default_factory=list)
    # Wall time of a whole `chorus recall` process (start-up included).
    command_seconds: list[float] = field(default_factory=list)
    # (part, category) → [(found any @5, all @5, any @10, all @10)]
    outcomes: dict[tuple[str, str], list[Outcome]] = field(default_factory=lambda: defaultdict(list))


def session_date(text: str) -> datetime:
    match = _LOCOMO_DATE.search(text)
    if match is None:
        raise ValueError(f"unreadable LoCoMo date: {text!r}")
    stamp = f"{match['day']} {match['month']} {match['year']} {match['time'].replace(' ', '')}"
    return datetime.strptime(stamp, "%d %B %Y %I:%M%p").replace(tzinfo=UTC)


def load_turns(conversation: str) -> list[Turn]:
    """Every turn with text, in order, dated by its session (photo captions are not text)."""
    data = json.loads((LOCOMO_DIR / f"{conversation}.json").read_text(encoding="utf-8"))
    turns: list[Turn] = []
    index = 1
    while f"session_{index}" in data:
        said = session_date(data[f"session_{index}_date_time"])
        for turn in data[f"session_{index}"]:
            if turn.get("text", "").strip():
                turns.append(Turn(turn["dia_id"], turn["speaker"], turn["text"], said))
        index += 1
    return turns


def load_dev_turns(conversation: str) -> list[Turn]:
    """A development conversation's turns, dated by their session."""
    return [
        Turn(turn.dia_id, turn.speaker, turn.text, session_date(turn.session_date))
        for turn in read_dialogue(DEV_DIR / f"{conversation}.txt")
    ]


def outcome(ranked: Sequence[set[str]], evidence: set[str]) -> Outcome:
    found: list[bool] = []
    for k in KS:
        covered = set().union(*ranked[:k]) if ranked else set()
        found += [bool(covered & evidence), evidence <= covered]
    return found[0], found[1], found[2], found[3]


def chat_id(conversation: str) -> str:
    return f"locomo-{conversation}"


def chorus_environment(directory: Path, database_url: str, dense: bool) -> dict[str, str]:
    return {
        "CHORUS_DATABASE_URL": database_url,
        "CHORUS_DATA_DIR": str(directory),
        "CHORUS_MEMORY_DENSE": json.dumps(dense),
    }


def open_chorus(directory: Path, database_url: str, dense: bool) -> Runtime:
    """The runtime over the benchmark's database (created when new)."""
    overrides = chorus_environment(directory, database_url, dense) | {"CHORUS_MEMORY_IDLE_SECONDS": "0"}
    return build_runtime(load_settings(REPO / "config.yaml", overrides))


async def build_chorus(
    directory: Path, database_url: str, conversations: dict[str, list[Turn]], dense: bool
) -> Runtime:
    """One database holding each conversation as its own group chat, recorded turn by turn."""
    runtime = open_chorus(directory, database_url, dense)
    for conversation, turns in conversations.items():
        for n, turn in enumerate(turns):
            await runtime.engine.record(
                InboundMessage(
                    lane="telegram",
                    platform_message_id=f"{conversation}-{n}",
                    chat_id=chat_id(conversation),
                    chat_kind="group",
                    actor=Actor(user_id=turn.speaker.lower(), display_name=turn.speaker, username=None),
                    text=turn.text,
                    received_at=turn.said_at,
                )
            )
    await runtime.engine.drain()
    assert runtime.memory is not None
    for session, _ in runtime.stores.sessions.list_sessions():
        await runtime.memory.flush(session)  # the group went idle
    return runtime


def index_bytes(database_file: Path) -> int:
    """Bytes of the full-text indexes, memory items and stored embeddings."""
    connection = sqlite3.connect(database_file)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(
            connection.execute(
                "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name LIKE 'messages_fts%' "
                "OR name LIKE 'memory_items%' OR name LIKE 'ix_memory_items%' OR name LIKE '%embeddings%'"
            ).fetchone()[0]
        )
    finally:
        connection.close()


class TimedEmbedder:
    """The runtime's encoder, timed, and without the cache of recent texts: every search
    embeds its query, as a question nobody asked before does."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0

    def embed(self, texts: Sequence[str]) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started


# A search: the question → the turns each hit covers, best first, and the seconds spent embedding it.
Search = Callable[[str], tuple[list[set[str]], float]]


def chorus_search(runtime: Runtime, owner: Owner, dia_by_seq: dict[int, str]) -> Search:
    assert runtime.memory is not None
    recall = runtime.memory.recall
    timed = None
    dense = recall.dense
    if dense is not None:
        timed = TimedEmbedder(
            dense.embedder.inner if isinstance(dense.embedder, RememberingEmbedder) else dense.embedder
        )
        dense.embedder = timed

    def covered(hit: RecallHit) -> set[str]:
        first = hit.seq or 0
        last = hit.last_seq if hit.last_seq is not None else first
        return {dia_by_seq[seq] for seq in range(first, last + 1) if seq in dia_by_seq}

    def search(question: str) -> tuple[list[set[str]], float]:
        if timed is not None and dense is not None:
            timed.seconds = 0.0
            dense.forget_query(question)
        hits = recall.search(owner, question, max(KS))
        return [covered(hit) for hit in hits], timed.seconds if timed is not None else 0.0

    return search


def bm25_search(turns: list[Turn]) -> Search:
    from rank_bm25 import BM25Okapi

    def tokens(text: str) -> list[str]:
        return re.findall(r"\w+", text.lower())

    index = BM25Okapi([tokens(turn.text) for turn in turns])

    def search(question: str) -> tuple[list[set[str]], float]:
        scores = index.get_scores(tokens(question))
        best = sorted(range(len(turns)), key=lambda i: scores[i], reverse=True)[: max(KS)]
        return [{turns[i].dia_id} for i in best if scores[i] > 0], 0.0

    return search


PARTS = ("tuned", "held-out")


def ask(variant: Variant, search: Search, part: str, questions: list[dict[str, Any]]) -> None:
    """Each question `REPEATS` times: the first answer is scored, every run is timed."""
    for question in questions:
        for _ in range(REPEATS):
            started = time.perf_counter()
            ranked, embedding = search(question["question"])
            variant.latencies_ms.append((time.perf_counter() - started) * 1000)
            if embedding:
                variant.embed_ms.append(embedding * 1000)
        variant.outcomes[(part, question["category"])].append(outcome(ranked, set(question["evidence"])))


async def measure_chorus(
    variant: Variant,
    dense: bool,
    conversations: dict[str, list[Turn]],
    questions: dict[str, list[dict[str, Any]]],
    held_out: set[str],
    keep: Path | None,
    postgres: str | None,
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = keep / ("dense" if dense else "full-text") if keep is not None else Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        # With --keep on PostgreSQL, the database's URL is kept in the folder.
        url_file = directory / "postgres-url"
        built = url_file.exists() if postgres else (directory / "recall.db").exists()
        if built:
            database_url = (
                url_file.read_text().strip() if postgres else f"sqlite:///{directory / 'recall.db'}"
            )
            runtime = open_chorus(directory, database_url, dense)  # built by an earlier run with --keep
        else:
            database_url = (
                fresh_database(postgres, "chorus_recall")
                if postgres
                else f"sqlite:///{directory / 'recall.db'}"
            )
            if postgres and keep is not None:
                url_file.write_text(database_url)
            started = time.perf_counter()
            runtime = await build_chorus(directory, database_url, conversations, dense)
            variant.build_seconds += time.perf_counter() - started
        # A group's memory belongs to "lane:chat id".
        sessions = {session.owner_id: session for session, _ in runtime.stores.sessions.list_sessions()}
        for conversation, asked in questions.items():
            session = sessions[f"telegram:{chat_id(conversation)}"]
            messages = [m for m in runtime.stores.messages.messages(session.id) if m.role == "user"]
            turns = conversations[conversation]
            dia_by_seq = {message.seq: turn.dia_id for message, turn in zip(messages, turns, strict=True)}
            search = chorus_search(runtime, Owner.of(session), dia_by_seq)
            search(asked[0]["question"])  # warm: the first query reads the owner's vectors
            ask(variant, search, PARTS[conversation in held_out], asked)
        await runtime.aclose()
        runtime.database.dispose()
        if not postgres:
            variant.index_bytes += index_bytes(directory / "recall.db")
        first = next(iter(questions))
        variant.command_seconds += time_command(
            directory, database_url, sessions[f"telegram:{chat_id(first)}"].id, questions[first], dense
        )
        if postgres and keep is None:
            drop_database(postgres, database_url)


def time_command(
    directory: Path, database_url: str, session_id: str, questions: list[dict[str, Any]], dense: bool
) -> list[float]:
    """Seconds for `chorus recall SESSION QUESTION -k 10`, as an operator runs it, five times."""
    environ = {**os.environ, **chorus_environment(directory, database_url, dense)}
    timings: list[float] = []
    for question in questions[:COMMAND_RUNS]:
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "bot.cli", "--config", str(REPO / "config.yaml"), "recall", session_id]
            + [question["question"], "-k", "10"],
            env=environ,
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        timings.append(time.perf_counter() - started)
    return timings


def share(results: Sequence[Outcome], column: int) -> float:
    return sum(result[column] for result in results) / len(results) if results else float("nan")


def table(variants: dict[str, Variant]) -> list[dict[str, Any]]:
    """Per method, one row for the tuned part, the held-out part and all questions.

    Each category shows `any / all` evidence recall@10; the overall columns add @5 and, on
    the "all" row, the timings and sizes.
    """
    rows: list[dict[str, Any]] = []
    for variant in variants.values():
        if not variant.latencies_ms:
            continue
        for part in (*PARTS, "all"):
            in_part = [key for key in variant.outcomes if part in (key[0], "all")]
            everything = [result for key in in_part for result in variant.outcomes[key]]
            if not everything:
                continue
            row: dict[str, Any] = {"method": variant.name, "part": part, "questions": len(everything)}
            for category in CATEGORY_SHARES:
                results = [
                    result for key in in_part if key[1] == category for result in variant.outcomes[key]
                ]
                row[f"{category} any / all @10"] = f"{share(results, 2):.3f} / {share(results, 3):.3f}"
            row |= {
                "any@5": share(everything, 0),
                "all@5": share(everything, 1),
                "any@10": share(everything, 2),
                "all@10": share(everything, 3),
            }
            if part == "all":
                row |= {
                    "search p50 ms": percentile(variant.latencies_ms, 0.5),
                    "search p99 ms": percentile(variant.latencies_ms, 0.99),
                    "embed p50 / p99 ms": (
                        f"{percentile(variant.embed_ms, 0.5):.1f} / {percentile(variant.embed_ms, 0.99):.1f}"
                        if variant.embed_ms
                        else ""
                    ),
                    "index KiB": variant.index_bytes / 1024,
                    "chorus recall s": median(variant.command_seconds) if variant.command_seconds else "",
                    "build s": variant.build_seconds or "",
                }
            rows.append(row)
    headers = ["method", "part", "questions", *(f"{category} any / all @10" for category in CATEGORY_SHARES)]
    headers += ["any@5", "all@5", "any@10", "all@10", "search p50 ms", "search p99 ms", "embed p50 / p99 ms"]
    headers += ["index KiB", "build s", "chorus recall s"]
    return [{header: row.get(header, "") for header in headers} for row in rows]


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--dev", action="store_true", help="the development set (bench/data/dev) instead")
    parser.add_argument("--conversations", help="comma-separated LoCoMo ids (default: all in the set)")
    parser.add_argument(
        "--locomo-scale", action="store_true", help="also load every other LoCoMo conversation"
    )
    parser.add_argument("--methods", default="dense,full-text,bm25", help="what to measure, comma-separated")
    parser.add_argument("--keep", type=Path, help="keep (and reuse) each method's database in this folder")
    parser.add_argument(
        "--postgres", metavar="ADMIN_URL", help="run Chorus on PostgreSQL (a role that may create databases)"
    )
    args = parser.parse_args(list(argv) if argv is not None else [])
    if args.dev:
        questions, held_out = dev_questions(), set()
    else:
        question_file = json.loads(args.questions.read_text(encoding="utf-8"))
        questions = question_file["questions"]
        held_out = set(question_file.get("held_out", []))
    in_set = sorted({question["conversation"] for question in questions})
    wanted = args.conversations.split(",") if args.conversations else in_set
    asked = {c: [q for q in questions if q["conversation"] == c] for c in wanted}
    loaded = sorted(path.stem for path in LOCOMO_DIR.glob("*.json")) if args.locomo_scale else wanted
    load = load_dev_turns if args.dev else load_turns
    conversations = {conversation: load(conversation) for conversation in loaded}
    from bot.memory.dense import load_embedder

    dense_available = load_embedder() is not None
    variants = {name: Variant(name) for name in ("chorus + dense", "chorus full-text", "rank-bm25")}
    methods = set(args.methods.split(","))
    load_before = os.getloadavg()
    for conversation in wanted if "bm25" in methods else ():
        started = time.perf_counter()
        bm25 = bm25_search(conversations[conversation])
        variants["rank-bm25"].build_seconds += time.perf_counter() - started
        ask(variants["rank-bm25"], bm25, PARTS[conversation in held_out], asked[conversation])
    for name, dense in (("chorus full-text", False), ("chorus + dense", True)):
        if (dense and not dense_available) or ("dense" if dense else "full-text") not in methods:
            continue
        asyncio.run(
            measure_chorus(variants[name], dense, conversations, asked, held_out, args.keep, args.postgres)
        )
    rows = table(variants)
    print(markdown_table(rows))
    turns = sum(len(turns) for turns in conversations.values())
    backend = "PostgreSQL" if args.postgres else "SQLite"
    print(
        f"\n{turns} turns in {len(conversations)} group chats on {backend}; "
        f"load average (1 min) "
        f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs"
    )
    if not dense_available:
        print("\n(dense recall not measured: the `dense` extra is not installed)")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
