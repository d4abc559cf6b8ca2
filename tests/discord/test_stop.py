"""Stopping a reply on Discord: the Stop button on the streaming draft, and /stop."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select

from bot.runtime import Runtime
from bot.storage.models import Message
from tests.discord.conftest import LaneFactory, eventually, spoken
from tests.discord.fake_discord import BOT, CHANNEL_ID, DM_CHANNEL_ID, FakeDiscord, SentMessage
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.openai_server import Reply as ModelReply

LONG = ModelReply(" ".join(f"word{n}" for n in range(400)), delay=0.1)


def stop_button(message: SentMessage) -> str:
    (row,) = message.components
    (button,) = row["components"]
    assert button["label"] == "Stop"
    return str(button["custom_id"])


def assistant_rows(runtime: Runtime) -> list[Message]:
    with Session(runtime.database) as db:
        return list(db.exec(select(Message).where(Message.role == "assistant")).all())


async def test_the_stop_button_ends_the_reply_which_is_stored_interrupted(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(LONG)
    _, runtime = await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "tell me everything")
    await fake_discord.wait_until(lambda: "▌" in "".join(fake_discord.texts_in(DM_CHANNEL_ID)))
    (draft,) = fake_discord.sent_in(DM_CHANNEL_ID)

    click = await fake_discord.click(draft.id, stop_button(draft))

    await fake_discord.wait_until(lambda: draft.text.endswith("[Stopped.]"))
    # Acknowledged as an update of the message; the reply's last edit took the button away.
    await fake_discord.wait_until(lambda: bool(click.callbacks))
    assert [callback["type"] for callback in click.callbacks] == [6]
    assert draft.components == []
    (stored,) = assistant_rows(runtime)
    assert stored.status == "interrupted"
    assert draft.text == spoken(f"{stored.content}\n\n[Stopped.]")
    assert len(stored.content.split()) < 400

    # The next turn works normally.
    await fake_discord.post_message(DM_CHANNEL_ID, "short now")
    await fake_discord.wait_until(
        lambda: fake_discord.texts_in(DM_CHANNEL_ID)[-1] == spoken("reply to: short now")
    )


async def test_the_stop_button_on_a_persona_message_in_a_server_channel(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(LONG)
    _, runtime = await start_lane()
    await fake_discord.post_message(CHANNEL_ID, f"<@{BOT['id']}> tell me everything", mentions=(BOT,))
    await fake_discord.wait_until(lambda: "▌" in "".join(fake_discord.texts_in(CHANNEL_ID)))
    (draft,) = fake_discord.sent_in(CHANNEL_ID)
    assert draft.username == "Ada"

    await fake_discord.click(draft.id, stop_button(draft))

    await fake_discord.wait_until(lambda: draft.text.endswith("[Stopped.]") and draft.components == [])
    (stored,) = assistant_rows(runtime)
    assert stored.status == "interrupted"


async def test_a_stop_button_whose_reply_has_ended_is_just_removed(
    start_lane: LaneFactory,
    fake_discord: FakeDiscord,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake_openai.script(LONG)
    lane, first_runtime = await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "tell me everything")
    await fake_discord.wait_until(lambda: "▌" in "".join(fake_discord.texts_in(DM_CHANNEL_ID)))
    (draft,) = fake_discord.sent_in(DM_CHANNEL_ID)
    custom_id = stop_button(draft)
    # A crash-like stop cuts the reply (its next edit fails); its button stays on the message.
    await lane.stop()
    await eventually(lambda: len(assistant_rows(first_runtime)) == 1)
    # The cut reply's handler ends on that failed edit, which discord.py logs after the
    # row is stored: wait for it, so the second lane starts with a clean log.
    await eventually(lambda: "Ignoring exception in on_message" in caplog.messages)
    caplog.clear()
    await start_lane()

    click = await fake_discord.click(draft.id, custom_id)

    await fake_discord.wait_until(lambda: bool(click.callbacks))
    assert [callback["type"] for callback in click.callbacks] == [7]
    assert draft.components == []


async def test_typed_stop_ends_a_streaming_reply(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(LONG)
    await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "tell me everything")
    await fake_discord.wait_until(lambda: "▌" in "".join(fake_discord.texts_in(DM_CHANNEL_ID)))
    (draft,) = fake_discord.sent_in(DM_CHANNEL_ID)

    await fake_discord.post_message(DM_CHANNEL_ID, "/stop")

    await fake_discord.wait_until(lambda: draft.text.endswith("[Stopped.]") and draft.components == [])
