"""Linking two accounts joins two persons: one conversation continues, nothing is lost."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from bot.cli.transfer import export_markdown
from bot.runtime import Runtime
from bot.storage.index_text import owner_token
from bot.storage.owners import Owner
from bot.turns.events import Reply
from tests.fakes.openai_server import FakeOpenAI, message_text
from tests.support.runtime import inbound


async def say(runtime: Runtime, text: str, lane: str, user_id: str) -> Reply:
    return await runtime.engine.respond(inbound(text, lane=lane, user_id=user_id))


async def link(runtime: Runtime, shown_on: tuple[str, str], entered_on: tuple[str, str]) -> Reply:
    shown = await say(runtime, "/link", *shown_on)
    code = shown.text.split("Your link code: ")[1].split()[0].strip("`")
    linked = await say(runtime, f"/link {code}", *entered_on)
    assert linked.kind == "command", linked.text
    return linked


def person_of(runtime: Runtime, lane: str, user_id: str) -> str:
    account = runtime.stores.identities.find_account(lane, user_id)
    assert account is not None
    return account.person_id


def history(fake_openai: FakeOpenAI) -> list[str]:
    return [message_text(m) for m in fake_openai.requests[-1].messages if m["role"] != "system"]


async def test_the_most_recent_conversation_continues_and_the_other_stays_reachable(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    older = await say(runtime, "I keep bees on my balcony.", "telegram", "4242")
    newer = await say(runtime, "I am planning a trip to Lisbon.", "web", "visitor-1")
    joining = person_of(runtime, "telegram", "4242")

    linked = await link(runtime, shown_on=("web", "visitor-1"), entered_on=("telegram", "4242"))

    assert linked.session_id == newer.session_id
    assert f"the other ({older.session_id[:8]}) stays saved" in linked.text
    asked = await say(runtime, "Where am I going?", "telegram", "4242")
    assert asked.session_id == newer.session_id
    assert history(fake_openai) == [
        "I am planning a trip to Lisbon.",
        "reply to: I am planning a trip to Lisbon.",
        "Where am I going?",
    ]
    # The set-aside conversation belongs to the person now: stored, exportable and recalled.
    person = person_of(runtime, "web", "visitor-1")
    assert person_of(runtime, "telegram", "4242") == person
    set_aside = runtime.stores.sessions.get_session(older.session_id)
    assert set_aside is not None and set_aside.owner_id == person
    assert "I keep bees on my balcony." in export_markdown(runtime.stores.messages, set_aside)
    recalled = await say(runtime, "/recall bees balcony", "web", "visitor-1")
    assert "I keep bees on my balcony." in recalled.text
    # The search rows moved with the messages: none is left under the joined person's tag.
    assert search_rows(runtime, joining) == 0
    assert search_rows(runtime, person) == 6  # both conversations, three turns


def search_rows(runtime: Runtime, person_id: str) -> int:
    query = text("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH :match")
    with runtime.stores.database.connect() as connection:
        return int(
            connection.execute(query, {"match": f'owner:"{owner_token("person", person_id)}"'}).scalar_one()
        )


async def test_the_code_makers_conversation_continues_when_it_is_newer(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    older = await say(runtime, "My sister lives in Porto.", "web", "visitor-2")
    newer = await say(runtime, "Remind me to water the plants.", "discord", "77")

    linked = await link(runtime, shown_on=("discord", "77"), entered_on=("web", "visitor-2"))

    assert linked.session_id == newer.session_id
    assert older.session_id[:8] in linked.text
    asked = await say(runtime, "What did I ask you?", "web", "visitor-2")
    assert asked.session_id == newer.session_id
    assert history(fake_openai)[0] == "Remind me to water the plants."
    recalled = await say(runtime, "/recall sister Porto", "discord", "77")
    assert "My sister lives in Porto." in recalled.text


async def test_an_account_without_history_joins_without_setting_anything_aside(
    runtimes, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path)
    talked = await say(runtime, "hello from the web", "web", "visitor-3")
    linked = await link(runtime, shown_on=("web", "visitor-3"), entered_on=("telegram", "5"))
    assert linked.session_id == talked.session_id
    assert "stays saved" not in linked.text


async def test_both_memories_merge_and_duplicates_are_kept_once(runtimes, tmp_path: Path) -> None:
    runtime = runtimes(tmp_path)
    assert runtime.memory is not None
    memory = runtime.memory
    web = await say(runtime, "We decided to use PostgreSQL for the database.", "web", "v")
    await say(runtime, "I prefer tea over coffee, always.", "web", "v")
    telegram = await say(runtime, "We decided to use PostgreSQL for the main database.", "telegram", "t")
    await say(runtime, "We decided to host the servers in Frankfurt.", "telegram", "t")
    for reply in (web, telegram):
        session = runtime.stores.sessions.get_session(reply.session_id)
        assert session is not None
        await memory.flush(session)
    telegram_owner = Owner("person", person_of(runtime, "telegram", "t"))
    assert len(memory.store.all_items(telegram_owner)) == 2

    await link(runtime, shown_on=("web", "v"), entered_on=("telegram", "t"))

    owner = Owner("person", person_of(runtime, "telegram", "t"))
    assert owner.id == person_of(runtime, "web", "v")
    items = {item.content: item.mentions for item in memory.store.all_items(owner)}
    # The near-identical PostgreSQL decision is one item, remembered twice.
    assert items == {
        "Alice: We decided to use PostgreSQL for the database.": 2,
        "Alice: I prefer tea over coffee, always.": 1,
        "Alice: We decided to host the servers in Frankfurt.": 1,
    }
    assert memory.store.all_items(telegram_owner) == []
    # The moved items are found under their new owner only.
    found = memory.store.full_text(owner, ["frankfurt"], 5, include_messages=False)["memory"]
    assert [hit.text for hit in found] == ["Alice: We decided to host the servers in Frankfurt."]
    assert memory.store.full_text(telegram_owner, ["frankfurt"], 5) == {"memory": [], "message": []}
    listed = await say(runtime, "/memory", "web", "v")
    assert "Frankfurt" in listed.text and "tea over coffee" in listed.text


async def test_unlink_after_a_merge_leaves_the_history_with_the_other_accounts(
    runtimes, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path)
    await say(runtime, "I keep bees on my balcony.", "telegram", "7")
    shared = await say(runtime, "I am planning a trip to Lisbon.", "web", "v")
    await link(runtime, shown_on=("telegram", "7"), entered_on=("web", "v"))

    unlinked = await say(runtime, "/unlink", "telegram", "7")

    assert unlinked.kind == "command"
    alone = await say(runtime, "hello again", "telegram", "7")
    assert alone.session_id != shared.session_id
    assert person_of(runtime, "telegram", "7") != person_of(runtime, "web", "v")
    still = await say(runtime, "and the web goes on", "web", "v")
    assert still.session_id == shared.session_id
    recalled = await say(runtime, "/recall bees", "web", "v")
    assert "I keep bees on my balcony." in recalled.text


async def test_every_account_of_the_joining_person_comes_along(runtimes, tmp_path: Path) -> None:
    runtime = runtimes(tmp_path)
    await say(runtime, "hi from discord", "discord", "d")
    await link(runtime, shown_on=("discord", "d"), entered_on=("telegram", "t"))
    await link(runtime, shown_on=("web", "v"), entered_on=("telegram", "t"))
    person = person_of(runtime, "web", "v")
    assert person_of(runtime, "telegram", "t") == person_of(runtime, "discord", "d") == person
    lanes = sorted(account.lane for account in runtime.stores.identities.accounts_of(person))
    assert lanes == ["discord", "telegram", "web"]


async def test_an_offload_that_started_before_the_link_stores_under_the_merged_person(
    runtimes, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path)
    assert runtime.memory is not None
    talked = await say(runtime, "My sister lives in Porto with two cats.", "web", "v")
    # What an idle offload armed before the link holds on to: the session as it was then.
    held = runtime.stores.sessions.get_session(talked.session_id)
    assert held is not None
    await say(runtime, "I keep bees on my balcony.", "telegram", "t")
    await link(runtime, shown_on=("telegram", "t"), entered_on=("web", "v"))

    await runtime.memory.flush(held)

    person = person_of(runtime, "web", "v")
    assert held.owner_id != person
    items = runtime.memory.store.all_items(Owner("person", person))
    assert [item.content for item in items] == ["Alice: My sister lives in Porto with two cats."]
