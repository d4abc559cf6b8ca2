"""Run and Deny under a Discord message, clicked as component interactions through the
gateway/REST stand-in and real discord.py: a member's call that asks runs once, a denial never."""

from __future__ import annotations

from tests.discord.conftest import LaneFactory, spoken
from tests.discord.fake_discord import ALICE, BOB, BOT, CHANNEL_ID, DM_CHANNEL_ID, FakeDiscord, SentMessage
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.tools.test_approvals import Notebook


def button(message: SentMessage, label: str) -> str:
    (row,) = message.components
    return next(str(item["custom_id"]) for item in row["components"] if item["label"] == label)


def question(fake_discord: FakeDiscord, channel_id: int) -> SentMessage | None:
    return next(
        (sent for sent in fake_discord.sent_in(channel_id) if sent.text.startswith("❓ write_note")), None
    )


async def test_the_asker_clicks_run_twice_in_a_dm_and_the_note_is_written_once(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    _, runtime = await start_lane(tools_approve={"write_note": {"members": "ask"}})
    notebook = Notebook().install(runtime)
    fake_openai.script(ToolCalls([("write_note", {"text": "buy milk"})]), "Noted.")
    await fake_discord.post_message(DM_CHANNEL_ID, "note: buy milk")

    await fake_discord.wait_until(lambda: question(fake_discord, DM_CHANNEL_ID) is not None)
    asked = question(fake_discord, DM_CHANNEL_ID)
    assert asked is not None and asked.text == "❓ write_note: buy milk · run it? (yes/no)"
    assert notebook.written == []
    run = button(asked, "Run")
    first = await fake_discord.click(asked.id, run)
    second = await fake_discord.click(asked.id, run)

    await fake_discord.wait_until(lambda: spoken("Noted.") in fake_discord.texts_in(DM_CHANNEL_ID))
    await fake_discord.wait_until(lambda: bool(first.callbacks and second.callbacks))
    assert notebook.written == ["buy milk"]
    # The first click edits the question (type 7, its buttons gone); the second is told, to itself alone.
    assert first.callbacks[0]["type"] == 7 and asked.components == []
    assert asked.text.endswith("Approved. (Alice)")
    assert second.callbacks[0]["type"] == 4
    assert second.callbacks[0]["data"]["content"] == "Already approved."
    approval = runtime.stores.approvals.recent(1)[0]
    assert approval.decided_by == f"discord:{ALICE['id']}"


async def test_someone_else_cannot_decide_and_the_askers_deny_in_a_server_channel_wins(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    # A tool that writes is offered in a server channel only when the operator says so.
    _, runtime = await start_lane(tools_approve={"write_note": {"groups": "ask"}}, tools_in_groups="all")
    notebook = Notebook().install(runtime)
    fake_openai.script(ToolCalls([("write_note", {"text": "sell"})]), "Left alone.")
    await fake_discord.post_message(CHANNEL_ID, f"<@{BOT['id']}> note: sell", mentions=(BOT,))

    await fake_discord.wait_until(lambda: question(fake_discord, CHANNEL_ID) is not None)
    asked = question(fake_discord, CHANNEL_ID)
    assert asked is not None
    stranger = await fake_discord.click(asked.id, button(asked, "Run"), user=BOB)
    await fake_discord.wait_until(lambda: bool(stranger.callbacks))
    assert stranger.callbacks[0]["data"]["content"].startswith("Only the person who asked")
    await fake_discord.click(asked.id, button(asked, "Deny"))

    await fake_discord.wait_until(lambda: "Left alone." in fake_discord.texts_in(CHANNEL_ID))
    assert notebook.written == []
    assert runtime.stores.approvals.recent(1)[0].state == "denied"
