"""Audio through the web API: not audio is refused and nothing kept; spoken parts go to their owner only."""

from __future__ import annotations

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.speech_server import FakeSpeech
from tests.web.conftest import ClientFactory
from tests.web.helpers import WebVisitor


async def test_a_file_named_as_audio_that_is_not_is_refused_and_nothing_is_stored(
    make_client: ClientFactory,
) -> None:
    client = await make_client()
    visitor = await WebVisitor.start(client)

    events = await visitor.say(
        "", files=[("voice", ("voice-message.webm", b"not audio " * 500, "audio/webm"))]
    )

    assert events[-1].name == "error"
    assert "I couldn't play 'voice-message.webm'" in events[-1].data["text"]
    assert (await visitor.history())["messages"] == []


async def test_a_spoken_reply_is_served_to_its_owner_only(
    make_client: ClientFactory, fake_openai: FakeOpenAI, fake_speech: FakeSpeech
) -> None:
    client = await make_client(model_base_url=fake_openai.base_url, speech_base_url=fake_speech.base_url)
    owner, stranger = await WebVisitor.start(client), await WebVisitor.start(client)
    await owner.say("/voice on")

    [path] = (await owner.say("hello"))[-1].data["speech"]

    spoken = await owner.get(path)
    assert spoken.status_code == 200 and spoken.headers["content-type"] == "audio/mpeg"
    assert spoken.content[:3] == b"ID3" or spoken.content[0] == 0xFF
    assert (await stranger.get(path)).status_code == 403
    assert (await owner.get(path.removesuffix("/0") + "/1")).status_code == 404
