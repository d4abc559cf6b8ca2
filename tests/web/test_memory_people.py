"""Two visitors on the web: each one's memory is their own, in the model's request and in the
commands, and /forget me forgets one's own memory only."""

from __future__ import annotations

import httpx

from bot.runtime import Runtime
from tests.fakes.openai_server import FakeOpenAI
from tests.support.memory_people import Lanes, flush_all, private_memory_stays_private
from tests.web.conftest import ClientFactory
from tests.web.helpers import WebVisitor


async def web_lanes(client: httpx.AsyncClient, server: FakeOpenAI) -> tuple[Lanes, dict[str, WebVisitor]]:
    visitors = {name: await WebVisitor.start(client, name) for name in ("Alice", "Bob")}

    async def private(who: str, text: str) -> str:
        done = (await visitors[who].say(text))[-1]
        assert done.name == "done", done
        return str(done.data["text"])

    runtime: Runtime = client.runtime  # type: ignore[attr-defined]
    return Lanes(runtime, server, private), visitors


async def test_each_visitors_memory_is_their_own(make_client: ClientFactory, fake_openai: FakeOpenAI) -> None:
    client = await make_client(model_base_url=fake_openai.base_url, memory_idle_seconds=0)
    lanes, _ = await web_lanes(client, fake_openai)
    await private_memory_stays_private(lanes)

    assert "4921" not in await lanes.private("Bob", "/recall locker code")
    assert "4921" in await lanes.private("Alice", "/recall locker code")
    forgot = await lanes.private("Bob", "/forget me")
    assert forgot.startswith("Forgot ")
    await flush_all(lanes.runtime)
    assert "4921" in await lanes.private("Alice", "/memory")
    assert "7788" not in await lanes.private("Bob", "/memory")
