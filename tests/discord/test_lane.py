from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from bot.errors import ConfigError
from channels.discord.lane import DiscordLane
from channels.text import split_message
from tests.discord.conftest import LaneFactory, lane_settings, spoken
from tests.discord.fake_discord import ALICE, DM_CHANNEL_ID, FakeDiscord
from tests.fakes.openai_server import FakeOpenAI, echo_reply, message_text
from tests.fakes.openai_server import Reply as OpenAIReply
from tests.support.runtime import make_runtime


async def test_dm_is_answered_in_the_persons_session(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    _, runtime = await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "hello there")

    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: hello there")])

    # A DM answers in place: no quote-reply.
    assert fake_discord.sent_in(DM_CHANNEL_ID)[0].reference_id is None
    assert fake_discord.calls_to("POST", f"/channels/{DM_CHANNEL_ID}/typing")
    assert fake_discord.identify is not None and fake_discord.identify["intents"] & (1 << 15)
    account = runtime.stores.identities.find_account("discord", ALICE["id"])
    assert account is not None
    assert fake_openai.requests[-1].messages[-1]["content"] == "hello there"


async def test_a_message_with_only_attachments_is_stored_and_answered(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    _, runtime = await start_lane()
    image = fake_discord.add_file("sketch.png", "image/png", _png())
    notes = fake_discord.add_file("notes.txt", "text/plain; charset=utf-8", b"launch checklist: tea")

    await fake_discord.post_message(DM_CHANNEL_ID, "", attachments=(image, notes))

    await fake_discord.wait_until(lambda: len(fake_openai.requests) == 1)
    # The reply, finished: the model echoes what it was sent.
    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken(echo_reply(fake_openai.requests[0].json))])
    account = runtime.stores.identities.find_account("discord", ALICE["id"])
    assert account is not None
    session = runtime.stores.sessions.private_session(account.person_id, "ada")
    (stored,) = [m for m in runtime.stores.messages.messages(session.id) if m.role == "user"]
    files = runtime.stores.messages.attachments_for([stored.id])[stored.id]
    assert [(f.kind, f.filename, f.mime_type, f.size) for f in files] == [
        ("image", "sketch.png", "image/png", len(_png())),
        ("document", "notes.txt", "text/plain", 21),
    ]
    assert "launch checklist: tea" in json.dumps(fake_openai.requests[0].json)
    assert len(fake_discord.calls_to("GET", "/users/@me")) == 1


async def test_persona_switch_by_text_command(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    await fake_discord.post_message(DM_CHANNEL_ID, "/persona sage")
    await fake_discord.wait_until(lambda: len(fake_discord.sent) == 1)
    assert fake_discord.texts_in(DM_CHANNEL_ID)[0].startswith("Switched to Sage (sage).")

    await fake_discord.post_message(DM_CHANNEL_ID, "teach me")

    await fake_discord.wait_until(
        lambda: fake_discord.texts_in(DM_CHANNEL_ID)[-1] == spoken("reply to: teach me", "Sage")
    )
    system = fake_openai.requests[0].messages[0]
    assert system["role"] == "system" and "You are Sage" in message_text(system)
    assert fake_openai.requests[0].json["temperature"] == 0.5


async def test_a_long_streamed_reply_is_edited_then_split_at_2000_without_breaking_code(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    code = "\n".join(f"    total += step_{n}(value)  # keep step {n}" for n in range(80))
    answer = f"Here is the loop:\n\n```python\ndef run(value):\n{code}\n```\n\nThat is all."
    chunks = [answer[i : i + 300] for i in range(0, len(answer), 300)]
    fake_openai.script(OpenAIReply(answer, chunks=chunks, delay=0.06))
    fake_discord.rate_limit_next_edit(0.05)
    await start_lane()

    await fake_discord.post_message(DM_CHANNEL_ID, "show me the loop")

    expected = split_message(spoken(answer), 2000)
    await fake_discord.wait_for_texts(DM_CHANNEL_ID, expected)
    assert len(answer) > 2000 and len(expected) == 2
    parts = fake_discord.sent_in(DM_CHANNEL_ID)
    assert all(len(part.text) <= 2000 and part.text.count("```") % 2 == 0 for part in parts)
    assert parts[1].text.startswith("```python\n")
    # The first message was a streamed draft: shown with a cursor, edited, then finalised.
    assert parts[0].versions[0].endswith("▌") and len(parts[0].versions) >= 3
    assert [p.reference_id for p in parts] == [None, None]
    patches = fake_discord.calls_to("PATCH", f"/messages/{parts[0].id}")
    assert len(patches) == len(parts[0].versions)  # one extra call: the 429 that was retried


async def test_a_redelivered_message_is_not_answered_twice(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    original = await fake_discord.post_message(DM_CHANNEL_ID, "only once")
    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken("reply to: only once")])

    await fake_discord.dispatch("MESSAGE_CREATE", original)
    await fake_discord.post_message(DM_CHANNEL_ID, "next")

    await fake_discord.wait_for_texts(
        DM_CHANNEL_ID, [spoken("reply to: only once"), spoken("reply to: next")]
    )
    assert len(fake_openai.requests) == 2


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buffer, format="PNG")
    return buffer.getvalue()


async def test_a_rejected_token_fails_at_startup_with_advice(
    tmp_path: Path, fake_discord: FakeDiscord
) -> None:
    runtime = make_runtime(tmp_path, **lane_settings(fake_discord, token="not-the-token"))
    lane = DiscordLane(runtime)
    try:
        with pytest.raises(ConfigError, match="Discord rejected the bot token. Check CHORUS_DISCORD_TOKEN"):
            await lane.start()
    finally:
        await lane.stop()
        await runtime.aclose()
    assert fake_discord.identify is None
