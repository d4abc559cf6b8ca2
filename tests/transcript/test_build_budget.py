"""build_context: the message cap, token budget and char cap, oldest dropped first."""

from __future__ import annotations

import pytest

from tests.transcript.factories import Persona, assistant, build, history, rolling, user
from transcript import Budget, count_tokens

SYSTEM_TOKENS = 4 + count_tokens(Persona().system_prompt)
USER_COST = 4 + 100
ASSISTANT_COST = 4 + 100 + count_tokens("sage")


def five_rows() -> list[object]:
    return [
        user(1, "u1", token_count=100),
        assistant(2, "a2", token_count=100),
        user(3, "u3", token_count=100),
        assistant(4, "a4", token_count=100),
        user(5, "u5", token_count=100),
    ]


def test_everything_fits_an_exact_budget() -> None:
    total = SYSTEM_TOKENS + 3 * USER_COST + 2 * ASSISTANT_COST
    context = build(five_rows(), budget=Budget(max_tokens=total))
    assert context.stats.kept_seqs == (1, 2, 3, 4, 5)
    assert context.stats.total_tokens == total
    assert context.stats.budget_tokens == total


def test_token_budget_drops_the_oldest_first() -> None:
    total = SYSTEM_TOKENS + 3 * USER_COST + 2 * ASSISTANT_COST
    context = build(five_rows(), budget=rolling(max_tokens=total - 1))
    # Dropping u1 leaves a2 at the start, which is trimmed as well.
    assert context.stats.kept_seqs == (3, 4, 5)
    assert context.stats.total_tokens == SYSTEM_TOKENS + 2 * USER_COST + ASSISTANT_COST
    assert context.stats.newest_truncated is False


def test_token_budget_counts_the_preamble() -> None:
    total = SYSTEM_TOKENS + 3 * USER_COST + 2 * ASSISTANT_COST
    context = build(five_rows(), budget=rolling(max_tokens=total), memory="Alice likes trains.")
    assert context.stats.kept_seqs == (3, 4, 5)
    assert context.stats.total_tokens <= total


def test_char_cap_drops_the_oldest_history_first() -> None:
    rows = [user(1, "a" * 40), assistant(2, "b" * 40), user(3, "c" * 40)]
    assert build(rows, budget=Budget(max_chars=80)).stats.kept_seqs == (3,)
    assert build(rows, budget=Budget(max_chars=120)).stats.kept_seqs == (1, 2, 3)


def test_newest_user_message_alone_over_the_budget_is_cut_in_the_middle() -> None:
    text = "BEGIN the question. " + "filler words here. " * 1000 + "What is the answer? END"
    rows = [user(1, "earlier"), assistant(2, "reply"), user(3, text)]
    context = build(rows, budget=Budget(max_tokens=300))
    (message,) = history(context)
    assert context.stats.kept_seqs == (3,)
    assert context.stats.newest_truncated is True
    assert message["content"].startswith("BEGIN the question.")
    assert message["content"].endswith("What is the answer? END")
    assert "characters cut …]" in message["content"]
    assert 200 < context.stats.total_tokens <= 300


def test_newest_user_message_is_cut_to_the_char_cap() -> None:
    text = "start " + "x" * 3000 + " finish"
    context = build([user(1, text)], budget=Budget(max_chars=500))
    content = history(context)[0]["content"]
    assert context.stats.newest_truncated is True
    assert len(content) <= 500
    assert content.startswith("start ") and content.endswith(" finish")
    assert "[… 2" in content  # about 2500 characters cut


def test_newest_user_message_is_kept_before_a_later_interrupted_reply() -> None:
    text = "word " * 2000
    rows = [user(1, text), assistant(2, "partial", status="interrupted")]
    context = build(rows, budget=Budget(max_tokens=400))
    assert context.stats.kept_seqs == (1, 2)
    assert context.stats.newest_truncated is True
    assert context.stats.total_tokens <= 400


def test_a_message_within_the_budget_is_never_cut() -> None:
    context = build([user(1, "short question")], budget=Budget(max_tokens=100, max_chars=100))
    assert history(context)[0]["content"] == "short question"
    assert context.stats.newest_truncated is False


@pytest.mark.parametrize(
    "fields",
    [{"max_messages": 0}, {"max_tokens": 0}, {"max_chars": -1}, {"document_tokens": -1}],
)
def test_budget_rejects_nonsense(fields: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        Budget(**fields)
