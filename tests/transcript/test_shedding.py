"""A tight window sheds in the documented order and keeps the question (transcript/shedding.py)."""

from __future__ import annotations

from tests.transcript.factories import assistant, build, history, tool_call, tool_result, user
from transcript import Budget, Capabilities, ToolCost, count_tokens

MEMORY = "What is known of Grace: " + "she rows on Sundays and keeps bees. " * 20
SUMMARY = "Earlier: " + "they planned the trip to the island in detail. " * 20
RECALL = tuple(f"Grace said on day {day} that the ferry leaves at seven." for day in range(6))
TOOLS = tuple(ToolCost(name, 150) for name in ("recall", "remind", "search", "snip"))


def rows() -> list:
    return [
        user(1, "Tell me about the ferry " + "and the market " * 20, sender_name="Grace"),
        assistant(2, "It leaves at seven " * 15),
        user(3, "And what should I bring?", sender_name="Grace"),
    ]


def fit(room: int, **options: object) -> object:
    return build(
        rows(),
        budget=Budget(max_tokens=room, tools=TOOLS, history_share=0.5),
        capabilities=Capabilities(tools=True),
        summary=SUMMARY,
        memory=MEMORY,
        recall=RECALL,
        **options,
    )


def test_everything_fits_a_roomy_window_and_nothing_is_shed() -> None:
    context = fit(10_000)
    assert context.stats.shed == ()
    assert context.tools == ("recall", "remind", "search", "snip")


ORDER = ["tools", "recall", "memory snapshot", "summary"]


def test_the_least_wanted_tool_schemas_go_first() -> None:
    room = fit(10_000).stats.total_tokens
    while not (context := fit(room)).stats.shed:
        room -= 10
    assert context.tools == ("recall", "remind", "search")
    assert [str(note) for note in context.stats.shed] == [
        "tools: 1 of 4 schemas left out (kept: recall, remind, search)"
    ]
    # The memory parts stay whole while dropping a schema was enough.
    assert MEMORY.strip() in context.messages[0]["content"]


def test_then_recall_then_the_memory_snapshot_then_the_summary() -> None:
    seen = []
    for room in range(fit(10_000).stats.total_tokens, 250, -25):
        parts = [note.part for note in fit(room).stats.shed]
        assert parts == ORDER[: len(parts)], room
        seen.append(len(parts))
    assert seen == sorted(seen) and set(seen) == {0, 1, 2, 3, 4}


def test_the_question_always_stays_and_the_context_fits() -> None:
    for room in (300, 400, 600, 900):
        context = fit(room)
        # The question leads its message; the turn's note (recall) follows it, if it fitted.
        assert history(context)[-1]["content"].startswith("And what should I bring?")
        assert context.stats.total_tokens <= room
        assert context.stats.question_excess_tokens == 0


def test_a_question_that_cannot_fit_alone_is_measured() -> None:
    question = "word " * 400
    context = build(
        [user(1, question)], budget=Budget(max_tokens=200, tools=TOOLS), capabilities=Capabilities(tools=True)
    )
    assert context.stats.question_tokens >= count_tokens(question)
    assert context.stats.question_excess_tokens > 0


def test_with_every_schema_shed_an_exchange_is_shown_as_text_and_never_split() -> None:
    exchange = [
        user(1, "What did I say about the dentist?", sender_name="Grace"),
        tool_call(2, ("c1", "recall", '{"query":"dentist"}')),
        tool_result(3, "c1", '{"hits":["Friday at ten"]}'),
        assistant(4, "You said Friday at ten."),
        user(5, "Thanks, and the ferry?", sender_name="Grace"),
    ]
    heavy = tuple(ToolCost(f"tool{n}", 400) for n in range(4))
    context = build(
        exchange, budget=Budget(max_tokens=300, tools=heavy), capabilities=Capabilities(tools=True)
    )

    assert context.tools == ()
    assert str(context.stats.shed[0]) == "tools: 4 of 4 schemas left out (kept: none)"
    messages = history(context)
    # No message in the tool shape without its schema: the exchange is whole, as text.
    assert all("tool_calls" not in message and message["role"] != "tool" for message in messages)
    assert messages[-1]["content"] == "Thanks, and the ferry?"
    assert any("Friday at ten" in str(message["content"]) for message in messages)
