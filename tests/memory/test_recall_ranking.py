"""What recall finds and how it shows it: fusion, sender names, stop words, dates, the turn budget."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.memory.cli import recall_output
from bot.memory.recall import (
    Ranking,
    Recall,
    format_hit,
    fuse,
    query_terms,
)
from bot.runtime import Runtime
from bot.search_terms import words
from bot.storage.memory_search import RecallHit
from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from bot.tools.base import ToolContext
from tests.support.runtime import RuntimeFactory, inbound, make_runtime

GROUP = {"chat_id": "g9", "chat_kind": "group"}
OWNER = Owner("group", "web:g9")


@pytest.fixture
async def runtime(tmp_path: Path) -> Runtime:
    # Full-text only (the test default), so these tests say what the lexical side does alone.
    built = make_runtime(tmp_path, memory_idle_seconds=0)
    yield built
    await built.aclose()


async def record(runtime: Runtime, text: str, name: str, when: datetime | None = None) -> None:
    message = inbound(text, user_id=name.lower(), display_name=name, **GROUP)
    if when is not None:
        message = type(message)(**{**message.__dict__, "received_at": when})
    await runtime.engine.record(message)


def recall(runtime: Runtime, query: str, limit: int = 5) -> list[RecallHit]:
    assert runtime.memory is not None
    return runtime.memory.recall.search(OWNER, query, limit)


def test_queries_lose_stop_words_and_contraction_fragments_but_keep_cjk() -> None:
    assert words("How has Caroline's sister been? Didn't she paint?") == ["caroline", "sister", "paint"]
    assert words("We're sure it’s Melanie’s") == ["sure", "melanie"]
    assert words("我们决定用新的数据库") == ["决", "定", "用", "新", "数", "据", "库"]
    assert query_terms("What did Caroline do in July 2022?")[0] == "m202207"


def test_an_item_and_its_source_message_take_one_slot() -> None:
    said = datetime(2023, 5, 8, tzinfo=UTC)

    def hit(source: str, id: int, seq: int) -> RecallHit:
        return RecallHit(source, id, f"text {id}", "fact", "s1", seq, seq, said, None, 1.0)

    items = [hit("memory", 1, 5), hit("memory", 2, 5), hit("memory", 3, 9)]
    messages = [hit("message", 50, 5), hit("message", 70, 7)]
    fused = fuse([Ranking("full-text", 1.0, items), Ranking("full-text", 1.0, messages)], 10)
    # Seq 5 has two items and its message: one slot, shown as the message.
    assert [(h.source, h.seq) for h in fused] == [("message", 5), ("memory", 9), ("message", 7)]
    assert fused[0].score > fused[1].score


def test_the_hit_one_list_ranks_first_keeps_its_place_among_hits_all_lists_agree_on() -> None:
    def hit(source: str, seq: int) -> RecallHit:
        return RecallHit(source, seq, f"text {seq}", "fact", "s1", seq, seq, None, None, 1.0)

    agreed = [hit("message", seq) for seq in range(1, 11)]
    lone = [hit("memory", 99), *(hit("memory", seq) for seq in range(1, 11))]
    rankings = [
        Ranking("full-text", 1.0, agreed),
        Ranking("dense", 1.0, agreed),
        Ranking("dense", 0.9, lone),
    ]
    fused = fuse(rankings, 5)
    # By fused score alone seq 99 (one list's first) is behind all ten agreed slots.
    assert 99 in [h.seq for h in fused]
    assert [h.seq for h in fused][:4] == [1, 2, 3, 4]
    assert [h.score for h in fused] == sorted((h.score for h in fused), reverse=True)


async def test_a_ranked_row_that_is_gone_when_read_gives_its_place_to_the_next(runtime: Runtime) -> None:
    await record(runtime, "The harbour ferry leaves at nine.", "Dana")
    await runtime.engine.drain()
    stored = recall(runtime, "ferry", 1)[0]

    class Dense:
        """Ranks first a row removed after its vector was read, then a stored message."""

        def start_search(self, *_: object) -> None:
            """Its ranking needs no query vector."""

        def search(self, *_: object, **__: object) -> tuple[list[RecallHit], list[RecallHit]]:
            gone = RecallHit("message", 999, "", "", stored.session_id, 7, 7, None, None, 0.9)
            return [], [gone, stored]

    assert runtime.memory is not None
    searcher = Recall(MemoryStore(runtime.database), runtime.memory.settings, Dense())  # type: ignore[arg-type]
    # Full-text finds nothing for this query: the dense list alone decides.
    hits = searcher.search(OWNER, "boat timetable", 1)
    assert [(hit.id, hit.text) for hit in hits] == [(stored.id, "The harbour ferry leaves at nine.")]


async def test_messages_and_items_are_fused_by_rank_not_by_source(runtime: Runtime) -> None:
    await record(runtime, "The quarterly budget review moved to the green meeting room.", "Dana")
    for n in range(19):
        await record(runtime, f"I decided the budget for project {n} stays small.", "Eli")
    await runtime.engine.drain()
    hits = recall(runtime, "green meeting room budget review", 10)
    assert hits[0].text.startswith("The quarterly budget review moved to the green meeting room")
    assert len({hit.seq for hit in hits}) == len(hits)  # ten hits, ten different messages


async def test_a_message_is_found_by_its_senders_name(runtime: Runtime) -> None:
    await record(runtime, "I adopted a puppy from the shelter.", "Caroline")
    await record(runtime, "I adopted a kitten from the shelter.", "Melanie")
    await runtime.engine.drain()
    for who in ("Caroline", "Melanie"):
        first = recall(runtime, f"What did {who} adopt from the shelter?")[0]
        assert first.sender_name == who


async def test_dates_are_the_messages_own_searchable_and_relative_ones_resolved(runtime: Runtime) -> None:
    may = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    july = datetime(2022, 7, 2, 9, 0, tzinfo=UTC)
    await record(runtime, "I went to a support group yesterday, it was powerful.", "Caroline", may)
    await record(runtime, "We ran a charity race for mental health.", "Melanie", july)
    for n in range(18):
        await record(runtime, f"Filler remark number {n} about the weather.", "Eli", may)
    await runtime.engine.drain()  # twenty steps: the offload ran
    items = MemoryStore(runtime.database).all_items(OWNER)
    support = next(item for item in items if "support group" in item.content)
    assert support.said_at is not None and support.said_at.date().isoformat() == "2023-05-08"
    assert (support.source_seq, support.source_last_seq) == (1, 1)
    assert support.content.endswith("(yesterday = 2023-05-07)")
    # A question naming the day the message talks about, or the month something was said.
    assert recall(runtime, "What happened on 7 May 2023?")[0].seq == 1
    assert recall(runtime, "What did they do in July 2022?")[0].seq == 2
    assert runtime.memory is not None
    shown = Recall(MemoryStore(runtime.database), runtime.memory.settings).search(OWNER, "support group", 1)
    assert shown[0].said_at is not None and shown[0].said_at.date().isoformat() == "2023-05-08"


async def test_a_turns_recall_stays_within_its_share_of_the_context_budget(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, memory_idle_seconds=0, memory_recall_items=3, model_context_window=2000)
    try:
        for n in range(40):
            await record(runtime, f"Harbor story {n}: " + "the harbor lights were bright " * 12, "Eli")
        reply = await runtime.engine.respond(
            inbound("Tell me about the harbor lights", was_mentioned=True, **GROUP)
        )
        await runtime.engine.drain()
        session = runtime.stores.sessions.get_session(reply.session_id or "")
        assert session is not None
        context = await runtime.engine.inspect(session)
        budget = 2000 - runtime.settings.model.reply_reserve_tokens
        assert 0 < context.stats.tokens.recall <= budget * runtime.settings.memory.recall_budget_share + 20
    finally:
        await runtime.aclose()


async def test_a_question_found_comes_with_the_reply_that_answered_it(runtime: Runtime) -> None:
    await record(runtime, "Wow, what a family picture! How long have you been married?", "Caroline")
    await record(runtime, "5 years already! Time flies.", "Melanie")
    await record(runtime, "The bakery on the corner sells sourdough now.", "Caroline")
    hits = recall(runtime, "How long has Melanie been married?")
    first = hits[0]
    assert first.text.endswith("How long have you been married?")
    assert first.reply is not None and first.reply.text == "5 years already! Time flies."
    assert (first.seq, first.last_seq) == (1, 2)
    # The reply is shown with its question, not again on its own.
    assert [hit.seq for hit in hits].count(2) == 0
    assert format_hit(first).endswith(
        "How long have you been married? — Melanie: 5 years already! Time flies."
    )
    # A message that asks nothing stands alone.
    bakery = recall(runtime, "sourdough bakery")[0]
    assert bakery.reply is None and bakery.last_seq == bakery.seq


async def test_the_recall_tool_returns_the_records_chorus_recall_json_prints(runtime: Runtime) -> None:
    await record(runtime, "We moved the billing database to PostgreSQL last week.", "Alice")
    await record(runtime, "Did the invoices survive the move?", "Bob")
    await record(runtime, "All of them, checked twice.", "Alice")
    await record(runtime, "Can you look that up for me?", "Bob")  # the question the tool answers
    ((session, _),) = runtime.stores.sessions.list_sessions()
    recall_tool = next(tool for tool in runtime.tools.all() if tool.name == "recall")
    context = ToolContext(session, "ada", None, group=True, call_id="c1")
    query = "billing database invoices"

    result = await recall_tool.run(context, recall_tool.parse({"query": query, "k": 20}))
    printed = recall_output(
        runtime.database, runtime.settings.memory, session.id, query, limit=20, as_json=True
    )

    assert not result.is_error
    returned = json.loads(result.content)
    assert returned["query"] == query
    hits = returned["hits"]
    question = next(hit for hit in hits if hit["text"] == "Did the invoices survive the move?")
    assert question["kind"] == "message" and question["speaker"] == "Bob" and question["seqs"] == [2, 3]
    assert question["reply"] == {"speaker": "Alice", "text": "All of them, checked twice.", "seq": 3}
    # One shape: each of the tool's hits is the command's record, its ids and `shown` left out.
    records = json.loads(printed)
    assert [hit.pop("in_context") for hit in hits] == [False] * len(hits)
    assert hits == [{field: record[field] for field in hits[0]} for record in records]
    assert set(records[0]) - set(hits[0]) == {"source", "id", "session_id", "shown", "said_by", "replaced_by"}
    assert "search again" in recall_tool.description


async def test_a_word_finds_its_other_forms_on_sqlite_and_postgresql(
    database: dict[str, str], runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    # Both backends stem: SQLite's porter tokenizer, PostgreSQL's English configuration.
    runtime = runtimes(tmp_path, memory_idle_seconds=0, **database)
    await record(runtime, "Melanie painted a lake sunrise with her kids.", "Melanie")
    await record(runtime, "The bakery on the corner sells sourdough now.", "Caroline")
    found = recall(runtime, "paintings of a lake")
    assert found and found[0].text.startswith("Melanie painted")
    assert recall(runtime, "kid")[0].text.startswith("Melanie painted")


async def test_a_rare_word_outranks_a_common_one_said_often_on_sqlite_and_postgresql(
    database: dict[str, str], runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    # bm25 on SQLite weighs a word by how rare it is; PostgreSQL's ranking must too, or a
    # message that repeats a word every other message holds outranks the one that matters.
    runtime = runtimes(tmp_path, memory_idle_seconds=0, **database)
    for n in range(12):
        await record(runtime, f"Coffee again this morning, cup number {n}.", "Caroline")
    await record(runtime, "Coffee, coffee, coffee: the whole weekend was coffee.", "Caroline")
    await record(runtime, "I finally bought the saxophone I kept talking about.", "Melanie")
    found = recall(runtime, "that coffee and saxophone thing")
    assert found[0].text.startswith("I finally bought the saxophone")
