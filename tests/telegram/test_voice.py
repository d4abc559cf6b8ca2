"""Voice notes, audio files and round videos on Telegram, heard; replies spoken as voice notes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI, Reply, last_user_text
from tests.fakes.speech_server import FakeSpeech
from tests.support.audio import audio_file, round_video, voice_note
from tests.support.runtime import make_runtime
from tests.support.teardown import within_deadline
from tests.telegram.bot_api_server import (
    TOKEN,
    FakeBotAPI,
    audio,
    group_chat,
    message,
    private_chat,
    private_text,
    user,
    video_note,
    voice,
)

GROUP = -100777


@pytest.fixture
async def runtime(
    tmp_path: Path, fake_openai: FakeOpenAI, bot_api: FakeBotAPI, fake_speech: FakeSpeech
) -> AsyncIterator[Runtime]:
    built = make_runtime(
        tmp_path,
        model_base_url=fake_openai.base_url,
        speech_base_url=fake_speech.base_url,
        channels_telegram_token=TOKEN,
        channels_telegram_api_base=bot_api.base_url,
        limits_audio_max_seconds=60,
    )
    yield built
    await within_deadline(built.aclose(), "closing the runtime")


async def test_a_voice_note_is_downloaded_heard_and_answered(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    bot_api.add_file("voc7", voice_note(7), "voice/file_7.oga")
    fake_speech.say("what is the capital of France")
    bot_api.push(message(private_chat(801), user(801), voice=voice("voc7", duration=7)))

    [answer] = await bot_api.wait_for(lambda: bot_api.sent_texts(801))

    heard = "[voice message, 0:07] what is the capital of France"
    assert answer == f"Ada\nreply to: {heard}"
    assert last_user_text(fake_openai.requests[0].json) == heard
    assert round(fake_speech.transcriptions[0].seconds or 0) == 7


async def test_an_audio_file_with_a_caption_and_a_round_video_are_heard(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    bot_api.add_file("aud3", audio_file(3), "music/file_3.mp3")
    bot_api.add_file("vn4", round_video(4), "video_notes/file_4.mp4")
    fake_speech.say("la la la", "hello from the round video")
    bot_api.push(message(private_chat(802), user(802), audio=audio("aud3"), caption="my song"))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(802)) == 1)
    bot_api.push(message(private_chat(802), user(802), video_note=video_note("vn4")))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(802)) == 2)

    assert last_user_text(fake_openai.requests[0].json) == "my song\n\n[audio: song.mp3, 0:03] la la la"
    assert last_user_text(fake_openai.requests[1].json) == "[video message, 0:04] hello from the round video"


async def test_in_a_group_a_voice_note_that_says_the_bots_name_addresses_it(
    lane: TelegramLane,
    runtime: Runtime,
    bot_api: FakeBotAPI,
    fake_openai: FakeOpenAI,
    fake_speech: FakeSpeech,
) -> None:
    bot_api.add_file("g1", voice_note(2, 300), "voice/g1.oga")
    bot_api.add_file("g2", voice_note(3, 500), "voice/g2.oga")
    fake_speech.say("lunch at noon everyone", "Chorus, when is lunch?")
    bot_api.push(message(group_chat(GROUP), user(803, "Bob"), voice=voice("g1", 2), message_id=61))
    await bot_api.wait_for(lambda: fake_speech.transcriptions and not bot_api.unconfirmed)
    bot_api.push(message(group_chat(GROUP), user(803, "Bob"), voice=voice("g2", 3), message_id=62))

    [answer] = await bot_api.wait_for(
        lambda: [text for text in bot_api.sent_texts(GROUP) if not text.endswith("▌")]
    )

    # The first note is context only; the second names the bot and is answered.
    assert answer.endswith("Bob: [voice message, 0:03] Chorus, when is lunch?")
    [request] = fake_openai.requests
    users = [m["content"] for m in request.json["messages"] if m["role"] == "user"]
    assert users == [
        "Bob: [voice message, 0:02] lunch at noon everyone",
        "Bob: [voice message, 0:03] Chorus, when is lunch?",
    ]
    replied = bot_api.calls_to("sendMessage")[0].params["reply_parameters"]["message_id"]
    assert replied == 62
    # Each note was heard once, though the group's was heard before it was stored.
    assert len(fake_speech.transcriptions) == 2


async def test_a_voice_note_longer_than_the_limit_is_refused_before_download(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    bot_api.push(message(private_chat(804), user(804), voice=voice("huge", duration=1200)))

    [answer] = await bot_api.wait_for(lambda: bot_api.sent_texts(804))

    assert answer == (
        "'voice_huge-u.ogg' is 20:00 long; the longest recording I take is 1:00. "
        "Send a shorter one, or split it."
    )
    assert not bot_api.calls_to("getFile") and not fake_openai.requests and not fake_speech.transcriptions


async def test_voice_on_sends_each_reply_also_as_a_voice_note(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_speech: FakeSpeech
) -> None:
    bot_api.push(private_text(805, "/voice on"))
    await bot_api.wait_for(lambda: bot_api.sent_texts(805))
    bot_api.push(private_text(805, "tell me **something**"))

    [spoken] = await bot_api.wait_for(lambda: bot_api.voices)

    assert bot_api.sent_texts(805)[-1] == "Ada\nreply to: tell me something"
    assert spoken.shown_as == "voice" and spoken.chat_id == "805"
    assert spoken.data.startswith(b"OggS") and spoken.duration and spoken.duration >= 1
    [request] = fake_speech.speeches
    assert request.body == {
        "model": "tts-1",
        "input": "reply to: tell me something.",  # read as words: no markup, a full stop
        "voice": "alloy",
        "response_format": "opus",
    }


async def test_a_server_that_speaks_only_wav_still_gives_a_voice_note(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_speech: FakeSpeech
) -> None:
    fake_speech.only_wav = True
    bot_api.push(private_text(806, "/voice on"))
    await bot_api.wait_for(lambda: bot_api.sent_texts(806))
    bot_api.push(private_text(806, "hello"))

    [spoken] = await bot_api.wait_for(lambda: bot_api.voices)

    assert spoken.shown_as == "voice" and spoken.data.startswith(b"OggS")


async def test_a_long_spoken_reply_comes_as_voice_notes_cut_at_sentence_ends(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    sentences = [f"Step {n} of the long plan is written down here for you." for n in range(100)]
    bot_api.push(private_text(807, "/voice on"))
    await bot_api.wait_for(lambda: bot_api.sent_texts(807))
    fake_openai.script(Reply(" ".join(sentences)))
    bot_api.push(private_text(807, "the whole plan, please"))

    await bot_api.wait_for(lambda: len(bot_api.voices) == 2)

    said = [request.body["input"] for request in fake_speech.speeches]
    assert len(said) == 2 and all(len(text) <= 4096 and text.endswith("here for you.") for text in said)
    assert " ".join(said) == " ".join(sentences)
    assert [voice.shown_as for voice in bot_api.voices] == ["voice", "voice"]
