"""Voice notes in turns: heard once, rebuilt into every later turn, a placeholder and one notice when not."""

from __future__ import annotations

from tests.fakes.openai_server import FakeOpenAI, message_text, server_error
from tests.fakes.speech_server import FakeSpeech
from tests.support.audio import voice_note
from tests.support.runtime import attachment, inbound


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
