"""What recall does so that every piece of a question spanning several moments is found."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.memory.recall import (
    informativeness,
    query_terms,
    with_named_first,
)
from bot.storage.memory_search import RecallHit
from bot.storage.owners import Owner
from tests.support.runtime import inbound, make_runtime

SPEAKERS = frozenset({"hana", "marcus"})


def message(n: int, text: str, sender: str = "Hana", day: int = 0, score: float = 1.0) -> RecallHit:
    said = datetime(2022, 1, 1, tzinfo=UTC) + timedelta(days=day)
    return RecallHit("message", n, text, "user", "s", n, n, said, sender, score)


def test_a_speakers_name_is_no_search_term_while_other_words_remain() -> None:
    assert "hana" not in query_terms("What water sports does Hana do?", SPEAKERS)
    assert query_terms("Hana?", SPEAKERS) == ["hana"]  # nothing else to search with


def test_a_message_that_says_little_beyond_its_senders_name_counts_less() -> None:
    assert informativeness(message(1, "Good for her."), SPEAKERS) < 0.5
    assert (
        informativeness(message(2, "I got my advanced diving certification in Puget Sound."), SPEAKERS) == 1
    )


def test_what_the_named_person_said_comes_first() -> None:
    hits = [message(1, "I dive every week", sender="Marcus", score=1.0), message(2, "I surf", score=0.9)]
    assert [hit.id for hit in with_named_first(hits, "What does Hana do on weekends?", SPEAKERS)] == [2, 1]


async def test_when_only_the_name_matches_the_name_is_searched(tmp_path: Path) -> None:
    runtime = make_runtime(tmp_path, memory_idle_seconds=0)
    try:
        for who, text in (("Caroline", "I went to a support group yesterday."), ("Mel", "Cloudy and mild.")):
            await runtime.engine.record(
                inbound(text, user_id=who.lower(), display_name=who, chat_id="g", chat_kind="group")
            )
        assert runtime.memory is not None
        hits = runtime.memory.recall.search(Owner("group", "web:g"), "What did Caroline share?", 1)
    finally:
        await runtime.aclose()
    assert hits and hits[0].text == "I went to a support group yesterday."
