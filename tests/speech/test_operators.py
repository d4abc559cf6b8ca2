"""Voice for operators: /context lists the voice parts the model reads; metrics count seconds, failures."""

from __future__ import annotations

from bot.metrics import REGISTRY
from bot.speech.speaking import SpeechTarget
from tests.fakes.openai_server import FakeOpenAI, server_error
from tests.fakes.speech_server import FakeSpeech
from tests.support.audio import voice_note
from tests.support.runtime import attachment, inbound

ANY_LANE = SpeechTarget(audio_format="mp3", max_chars=4096, max_bytes=10 * 1024 * 1024)


def voice(seconds: float):
    return attachment("voice.ogg", "audio/ogg", voice_note(seconds), kind="voice")


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_context_shows_each_voice_part_as_the_model_reads_it(
    runtimes, tmp_path, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    fake_speech.say("remind me to water the plants")
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, speech_base_url=fake_speech.base_url)
    await runtime.engine.respond(inbound("", attachments=(voice(7),)))
    await runtime.engine.respond(inbound("and a photo later"))

    report = await runtime.engine.respond(inbound("/context"))

    assert "Voice and audio in the window (1), as the model reads them:" in report.text
    assert "  #1 Alice: [voice message, 0:07] remind me to water the plants" in report.text


async def test_metrics_count_seconds_heard_and_spoken_and_each_failure(
    runtimes, tmp_path, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    runtime = runtimes(
        tmp_path,
        model_base_url=fake_openai.base_url,
        speech_base_url=fake_speech.base_url,
        speech_max_retries=0,
    )
    heard = sample("chorus_speech_seconds_total", direction="transcribed")
    failed = sample("chorus_speech_failures_total", direction="transcribe", reason="unavailable")

    await runtime.engine.respond(inbound("", attachments=(voice(3),)))
    fake_speech.fail_next(server_error(503))
    await runtime.engine.respond(inbound("", attachments=(voice(2),)))

    assert round(sample("chorus_speech_seconds_total", direction="transcribed") - heard) == 3
    assert sample("chorus_speech_failures_total", direction="transcribe", reason="unavailable") == failed + 1

    spoken = sample("chorus_speech_seconds_total", direction="synthesised")
    parts = await runtime.engine.speaking.speak("One sentence. And another one.", ANY_LANE)
    added = sample("chorus_speech_seconds_total", direction="synthesised") - spoken
    assert parts and abs(added - sum(part.seconds for part in parts)) < 0.01 and added > 0
