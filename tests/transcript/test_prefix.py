"""`first_change` names the first part of a request that breaks the previous one's steady prefix."""

from __future__ import annotations

from typing import Any

from tests.transcript.factories import assistant, build, user
from transcript.prefix import PrefixChange, PrefixHistory, first_change, prefix_line, prompt_print


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def turns(count: int) -> list[Any]:
    rows: list[Any] = []
    for turn in range(count):
        rows += [user(2 * turn + 1, f"question {turn}"), assistant(2 * turn + 2, f"answer {turn}")]
    return rows


def test_the_next_turn_keeps_the_prefix_while_recall_changes_the_newest_user_message() -> None:
    earlier = build([*turns(2), user(5, "question 2")], recall=("hit one",))
    later = build([*turns(3), user(7, "question 3")], recall=("hit two",))

    assert first_change(prompt_print(earlier.messages, []), prompt_print(later.messages, [])) is None


def test_a_message_changed_before_the_newest_user_message_is_named_by_its_place() -> None:
    earlier = build([*turns(2), user(5, "question 2")])
    changed = turns(3)
    changed[2] = user(3, "question 1, edited")

    found = first_change(prompt_print(earlier.messages, []), prompt_print(build(changed).messages, []))

    assert found == PrefixChange("message", 2)
    assert found.describe() == "message 3 after the system prompt"


def test_a_window_that_moved_forward_breaks_at_the_first_message() -> None:
    earlier = build(turns(3))
    later = build(turns(4)[2:])

    assert first_change(prompt_print(earlier.messages, []), prompt_print(later.messages, [])) == PrefixChange(
        "message", 0
    )


def test_a_shorter_history_breaks_where_it_ends() -> None:
    earlier = build([*turns(3), user(7, "question 3")])
    later = build(turns(1))

    assert first_change(prompt_print(earlier.messages, []), prompt_print(later.messages, [])) == PrefixChange(
        "message", 2
    )


def test_tools_come_first_and_their_order_does_not_matter() -> None:
    messages = build(turns(1)).messages
    steady = prompt_print(messages, [tool("a"), tool("b")])

    assert first_change(steady, prompt_print(messages, [tool("b"), tool("a")])) is None
    assert first_change(steady, prompt_print(messages, [tool("a")])) == PrefixChange("tools")
    other_system = [{"role": "system", "content": "Someone else."}, *messages[1:]]
    assert first_change(steady, prompt_print(other_system, [tool("a"), tool("b")])) == PrefixChange("system")
    assert first_change(steady, prompt_print(other_system, [tool("a")])) == PrefixChange("tools")


def test_another_model_breaks_the_whole_prefix() -> None:
    messages = build(turns(1)).messages

    found = first_change(prompt_print(messages, [], "small"), prompt_print(messages, [], "large"))

    assert found == PrefixChange("model") and found.describe() == "the model"


def test_the_context_line_says_unknown_until_two_requests_were_compared() -> None:
    unknown = "Prompt prefix: unknown (no two requests of this conversation since Chorus started)."
    assert prefix_line(None) == unknown
    assert prefix_line(PrefixHistory(compared=0)) == unknown
    broke = PrefixHistory(
        compared=3,
        breaks={"tools": 1, "persona": 1},
        last_change=PrefixChange("tools"),
        last_reason="tools",
        newest_broke=True,
    )
    assert prefix_line(broke) == (
        "Prompt prefix: the newest request broke it at the tool list (tools); 3 compared since Chorus "
        "started, breaks: persona 1, tools 1."
    )
