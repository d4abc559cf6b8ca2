"""Voice notes in turns: heard once, rebuilt into every later turn, a placeholder and one notice when not."""

from __future__ import annotations

import asyncio
import tracemalloc

from bot.cli import main
from bot.turns.inbound import InboundAttachment
from tests.fakes.openai_server import FakeOpenAI, bad_request, message_text, server_error
from tests.fakes.speech_server import FakeSpeech
from tests.support.audio import silence, voice_note
from tests.support.files import png_image
from tests.support.runtime import REPO_CONFIG, attachment, inbound, make_settings


def voice(seconds: float = 7, frequency: int = 440):
    return attachment("voice.ogg", "audio/ogg", voice_note(seconds, frequency), kind="voice")


def user_texts(request) -> list[str]:
    return [message_text(m) for m in request.json["messages"] if m["role"] == "user"]


async def test_a_voice_note_is_heard_and_its_transcript_comes_back_in_every_later_turn(
    runtimes, tmp_path, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    fake_speech.say("remind me to water the plants")
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, speech_base_url=fake_speech.base_url)

    first = await runtime.engine.respond(inbound("", attachments=(voice(),)))
    second = await runtime.engine.respond(inbound("and what did I ask?"))

    heard = "[voice message, 0:07] remind me to water the plants"
    assert first.kind == second.kind == "assistant"
    assert user_texts(fake_openai.requests[0]) == [heard]
    assert user_texts(fake_openai.requests[1]) == [heard, "and what did I ask?"]
    [upload] = fake_speech.transcriptions
    assert upload.fields["model"] == "whisper-1" and upload.fields["response_format"] == "json"
    assert upload.data[:4] == b"RIFF" and round(upload.seconds) == 7
    [message_id] = [m.id for m in runtime.stores.messages.messages(first.session_id) if m.role == "user"][:1]
    [stored] = runtime.stores.messages.attachments_for([message_id])[message_id]
    assert (stored.kind, stored.text, round(stored.duration_seconds)) == (
        "voice",
        "remind me to water the plants",
        7,
    )


async def test_the_same_recording_sent_again_is_not_heard_twice(
    runtimes, tmp_path, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    fake_speech.say("the first hearing")
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, speech_base_url=fake_speech.base_url)

    # Ogg streams carry a random serial number: only the same file has the same hash.
    note = voice()
    await runtime.engine.respond(inbound("", attachments=(note,)))
    await runtime.engine.respond(inbound("", attachments=(note,)))

    assert len(fake_speech.transcriptions) == 1
    assert user_texts(fake_openai.requests[1])[-1] == "[voice message, 0:07] the first hearing"


async def test_without_a_speech_service_the_model_gets_the_length_and_the_person_is_told_once(
    runtimes, tmp_path, fake_openai: FakeOpenAI
) -> None:
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)

    first = await runtime.engine.respond(inbound("", attachments=(voice(),)))
    second = await runtime.engine.respond(inbound("", attachments=(voice(3, 500),)))

    assert user_texts(fake_openai.requests[0]) == [
        "[voice message, 0:07; not transcribed, its words are not available]"
    ]
    assert first.text.startswith("reply to: [voice message, 0:07;")
    assert first.text.endswith(
        "[I couldn't listen to your voice note: no speech-to-text service is set up here. It is 0:07 "
        "long. Please type what you said; the recording is kept and can be transcribed later.]"
    )
    assert "couldn't listen" not in second.text
    stored = runtime.stores.messages.messages(first.session_id)
    assert [m.content for m in stored if m.role == "assistant"] == [
        "reply to: [voice message, 0:07; not transcribed, its words are not available]",
        "reply to: [voice message, 0:03; not transcribed, its words are not available]",
    ]


async def test_a_failing_speech_service_loses_nothing_and_says_why(
    runtimes, tmp_path, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    fake_speech.fail_next(server_error(503), server_error(503), server_error(503))
    runtime = runtimes(
        tmp_path,
        model_base_url=fake_openai.base_url,
        speech_base_url=fake_speech.base_url,
        speech_max_retries=2,
    )

    reply = await runtime.engine.respond(inbound("listen", attachments=(voice(),)))

    assert reply.kind == "assistant"
    assert len(fake_speech.transcriptions) == 3
    assert "the speech service could not hear the voice note (HTTP 503)" in reply.text
    assert user_texts(fake_openai.requests[0]) == [
        "listen\n\n[voice message, 0:07; not transcribed, its words are not available]"
    ]


async def test_chorus_speech_transcribe_hears_what_was_stored_without_a_service(
    runtimes, tmp_path, fake_openai: FakeOpenAI, fake_speech: FakeSpeech, monkeypatch
) -> None:
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    reply = await runtime.engine.respond(inbound("", attachments=(voice(),)))
    await runtime.engine.respond(inbound("", attachments=(voice(2, 600),)))
    # The first recording heard (the oldest) is refused once.
    fake_speech.fail_next(bad_request("this one is refused"))
    settings = make_settings(tmp_path, speech_base_url=fake_speech.base_url)
    monkeypatch.setenv("CHORUS_CONFIG", str(REPO_CONFIG))
    for name, value in {
        "CHORUS_DATABASE_URL": settings.database_url,
        "CHORUS_DATA_DIR": str(settings.data_dir),
        "CHORUS_SPEECH_BASE_URL": fake_speech.base_url,
    }.items():
        monkeypatch.setenv(name, value)
    fake_speech.say("found later")

    # The refused one stays without a transcript, for the next run; the third run finds nothing.
    assert await asyncio.to_thread(main, ["speech", "transcribe"]) == 0
    fake_speech.say("heard on the second run")
    assert await asyncio.to_thread(main, ["speech", "transcribe"]) == 0
    assert await asyncio.to_thread(main, ["speech", "transcribe"]) == 0

    assert len(fake_speech.transcriptions) == 3
    await runtime.engine.respond(inbound("so?"))
    assert user_texts(fake_openai.requests[-1]) == [
        "[voice message, 0:07] heard on the second run",
        "[voice message, 0:02] found later",
        "so?",
    ]
    assert reply.session_id is not None


async def test_too_long_or_not_audio_is_refused_clearly_and_nothing_is_stored(
    runtimes, tmp_path, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    runtime = runtimes(
        tmp_path,
        model_base_url=fake_openai.base_url,
        speech_base_url=fake_speech.base_url,
        limits_audio_max_seconds=5,
    )
    fetched: list[str] = []

    async def never() -> bytes:
        fetched.append("declared too long")
        return b""

    declared = InboundAttachment("voice", "voice.ogg", "audio/ogg", 100, never, duration_seconds=3600)
    playlist = b"#EXTM3U\n#EXTINF:1,\nfile:///etc/passwd\n"

    sent = [
        declared,
        voice(7),
        attachment("a.mp3", "audio/mpeg", playlist),
        attachment("b.ogg", "audio/ogg", png_image()),
    ]
    replies = [await runtime.engine.respond(inbound("", attachments=(item,))) for item in sent]

    assert [reply.kind for reply in replies] == ["error"] * 4
    assert replies[0].text.startswith("'voice.ogg' is 1:00:00 long; the longest recording I take is 0:05.")
    assert replies[1].text.startswith("'voice.ogg' runs past 0:05; the longest recording I take is 0:05.")
    assert replies[2].text.startswith("I couldn't play 'a.mp3': it is not audio I can decode")
    assert replies[3].text.startswith("I couldn't play 'b.ogg'")
    assert fetched == [] and not fake_openai.requests and not fake_speech.transcriptions
    assert runtime.stores.sessions.list_sessions()[0][1] == 0


async def test_a_long_hostile_recording_is_refused_without_holding_its_sound(
    runtimes, tmp_path, fake_openai: FakeOpenAI
) -> None:
    # Two hours of silence fit in a small file; decoded whole it would be 230 MB of samples.
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, limits_audio_max_seconds=60)
    bomb = attachment("long.ogg", "audio/ogg", silence(7200), kind="voice")
    assert bomb.size is not None and bomb.size < 2_000_000

    tracemalloc.start()
    try:
        reply = await runtime.engine.respond(inbound("", attachments=(bomb,)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert reply.kind == "error" and "runs past 1:00" in reply.text
    assert peak < 30_000_000
