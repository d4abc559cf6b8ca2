"""Voice messages and audio files on Discord, heard; replies spoken as audio attachments."""

from __future__ import annotations

from typing import Any

from tests.discord.conftest import LaneFactory, eventually, spoken
from tests.discord.fake_discord import (
    BOB,
    BOT,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    VOICE_MESSAGE_FLAG,
    FakeDiscord,
)
from tests.fakes.openai_server import FakeOpenAI, last_user_text, message_text, server_error
from tests.fakes.speech_server import FakeSpeech
from tests.support.audio import audio_file, voice_note

MENTION = f"<@{BOT['id']}>"


def with_speech(fake_speech: FakeSpeech) -> dict[str, Any]:
    return {"speech_base_url": fake_speech.base_url, "limits_audio_max_seconds": 60}


async def test_a_voice_message_and_an_audio_file_are_heard_in_a_dm(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    _, runtime = await start_lane(**with_speech(fake_speech))
    fake_speech.say("what is the capital of France", "la la la")
    recorded = fake_discord.add_voice_message(voice_note(5), duration_secs=5.02)
    await fake_discord.post_message(DM_CHANNEL_ID, "", attachments=(recorded,), flags=VOICE_MESSAGE_FLAG)
    heard = "[voice message, 0:05] what is the capital of France"
    await fake_discord.wait_for_texts(DM_CHANNEL_ID, [spoken(f"reply to: {heard}")])

    song = fake_discord.add_file("song.mp3", "audio/mpeg", audio_file(3))
    await fake_discord.post_message(DM_CHANNEL_ID, "my song", attachments=(song,))
    await fake_discord.wait_until(lambda: len(fake_discord.texts_in(DM_CHANNEL_ID)) == 2)

    assert last_user_text(fake_openai.requests[0].json) == heard
    assert last_user_text(fake_openai.requests[1].json) == "my song\n\n[audio: song.mp3, 0:03] la la la"
    [account] = [runtime.stores.identities.find_account("discord", "1100000000000000200")]
    assert account is not None
    session = runtime.stores.sessions.private_session(account.person_id, "ada")
    said = [m.id for m in runtime.stores.messages.messages(session.id) if m.role == "user"]
    files = runtime.stores.messages.attachments_for(said)
    kinds = [(f.kind, f.mime_type, round(f.duration_seconds or 0)) for m in said for f in files[m]]
    assert kinds == [("voice", "audio/ogg", 5), ("audio", "audio/mpeg", 3)]


async def test_in_a_server_a_voice_message_that_says_the_bots_name_addresses_it(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    await start_lane(**with_speech(fake_speech))
    fake_speech.say("lunch at noon everyone", "Chorus, when is lunch?")
    first = fake_discord.add_voice_message(voice_note(2, 300), duration_secs=2.0)
    await fake_discord.post_message(
        CHANNEL_ID, "", author=BOB, attachments=(first,), flags=VOICE_MESSAGE_FLAG
    )
    await eventually(lambda: len(fake_speech.transcriptions) == 1)
    second = fake_discord.add_voice_message(voice_note(3, 500), duration_secs=3.0)
    await fake_discord.post_message(
        CHANNEL_ID, "", author=BOB, attachments=(second,), flags=VOICE_MESSAGE_FLAG
    )

    answer = "reply to: Bob: [voice message, 0:03] Chorus, when is lunch?"
    await fake_discord.wait_for_texts(CHANNEL_ID, [answer])
    [request] = fake_openai.requests
    assert [message_text(m) for m in request.messages[1:]] == [
        "Bob: [voice message, 0:02] lunch at noon everyone",
        "Bob: [voice message, 0:03] Chorus, when is lunch?",
    ]
    # Each was heard once, though the second was heard before it was stored.
    assert len(fake_speech.transcriptions) == 2


async def test_voice_on_sends_each_reply_also_as_audio_by_the_persona(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_speech: FakeSpeech
) -> None:
    await start_lane(**with_speech(fake_speech))
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} /voice on", mentions=(BOT,))
    await fake_discord.wait_until(lambda: len(fake_discord.texts_in(CHANNEL_ID)) == 1)
    await fake_discord.post_message(CHANNEL_ID, f"{MENTION} tell me **something**", mentions=(BOT,))

    await fake_discord.wait_until(lambda: any(m.files for m in fake_discord.sent_in(CHANNEL_ID)))

    written, audio = fake_discord.sent_in(CHANNEL_ID)[1:]
    assert written.text == "reply to: Alice: tell me **something**"
    [file] = audio.files
    assert file.filename == "reply-1.ogg" and file.data.startswith(b"OggS")
    assert audio.attachments[0]["content_type"] == "audio/ogg"
    # Spoken by the persona that wrote the reply, through the channel's webhook.
    assert (audio.username, audio.webhook_id) == ("Ada", written.webhook_id) and audio.webhook_id
    assert [request.body["input"] for request in fake_speech.speeches] == [
        "reply to: Alice: tell me something."
    ]


async def test_a_speech_service_that_fails_gets_one_line_after_the_written_reply(
    start_lane: LaneFactory, fake_discord: FakeDiscord, fake_speech: FakeSpeech
) -> None:
    await start_lane(**with_speech(fake_speech), speech_max_retries=0)
    await fake_discord.post_message(DM_CHANNEL_ID, "/voice on")
    await fake_discord.wait_until(lambda: len(fake_discord.texts_in(DM_CHANNEL_ID)) == 1)
    fake_speech.fail_next(server_error(503))
    await fake_discord.post_message(DM_CHANNEL_ID, "hello")

    await fake_discord.wait_until(lambda: len(fake_discord.texts_in(DM_CHANNEL_ID)) == 3)

    written, notice = fake_discord.texts_in(DM_CHANNEL_ID)[1:]
    assert written == spoken("reply to: hello")
    assert notice.startswith("(I couldn't speak this reply: ")
    assert not any(m.files for m in fake_discord.sent_in(DM_CHANNEL_ID))
