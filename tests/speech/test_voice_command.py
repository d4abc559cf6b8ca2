"""/voice on|off: a conversation's replies also spoken, the stored reply still text."""

from __future__ import annotations

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.speech_server import FakeSpeech
from tests.support.runtime import inbound


async def test_voice_on_marks_replies_to_be_spoken_and_off_stops_it(
    runtimes, tmp_path, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url, speech_base_url=fake_speech.base_url)
    engine = runtime.engine

    before = await engine.respond(inbound("hello"))
    state = await engine.respond(inbound("/voice"))
    on = await engine.respond(inbound("/voice on"))
    spoken = await engine.respond(inbound("say it"))
    off = await engine.respond(inbound("/voice off"))
    after = await engine.respond(inbound("and now?"))

    assert before.spoken_text is None
    assert state.text.startswith("Spoken replies are off")
    assert on.kind == "command" and on.text.startswith("Spoken replies are on")
    assert spoken.spoken_text == "reply to: say it" == spoken.text
    assert off.text.startswith("Spoken replies are off")
    assert after.spoken_text is None
    # Speaking stores nothing: the reply row is the model's text.
    assert runtime.stores.messages.messages(spoken.session_id)[-1].content == "reply to: and now?"


async def test_voice_on_without_a_speech_service_says_what_is_missing(
    runtimes, tmp_path, fake_openai: FakeOpenAI
) -> None:
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)

    answer = await runtime.engine.respond(inbound("/voice on"))
    reply = await runtime.engine.respond(inbound("hi"))

    assert answer.kind == "error"
    assert "speech.base_url" in answer.text
    assert reply.spoken_text is None


async def test_voice_takes_only_on_or_off(runtimes, tmp_path, fake_openai: FakeOpenAI) -> None:
    runtime = runtimes(tmp_path, model_base_url=fake_openai.base_url)
    answer = await runtime.engine.respond(inbound("/voice loud"))
    assert answer.kind == "error" and answer.text.startswith("Usage: /voice on")
