"""The fake server itself: other suites rely on its defaults and its non-stream answers."""

from __future__ import annotations

import httpx

from tests.fakes.openai_server import FakeOpenAI, HttpError, split_words


async def test_non_stream_request_gets_a_json_completion(fake_openai: FakeOpenAI) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "ping"}], "stream": False}

    async with httpx.AsyncClient() as client:
        response = await client.post(f"{fake_openai.base_url}/chat/completions", json=body)

    assert response.status_code == 200
    assert response.json()["choices"][0]["message"] == {
        "role": "assistant",
        "content": "reply to: ping",
    }
    assert fake_openai.requests[0].json == body


async def test_default_and_summary_responders_can_be_replaced(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = lambda body: f"{len(body['messages'])} messages"
    fake_openai.summary = lambda body: "short summary"
    url = f"{fake_openai.base_url}/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": False}

    async with httpx.AsyncClient() as client:
        chat = await client.post(url, json=body)
        summary = await client.post(url, json=body, headers={"X-Chorus-Purpose": "summary"})
        fake_openai.script(HttpError(503, "busy"))
        scripted = await client.post(url, json=body)

    assert chat.json()["choices"][0]["message"]["content"] == "1 messages"
    assert summary.json()["choices"][0]["message"]["content"] == "short summary"
    assert (scripted.status_code, scripted.text) == (503, "busy")
    assert [r.is_summary for r in fake_openai.requests] == [False, True, False]


async def test_context_manager_serves_on_loopback_and_stops() -> None:
    async with FakeOpenAI() as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{server.base_url}/props")
    assert response.status_code == 404
    assert server.other_requests[0].path == "/v1/props"


def test_split_words_joins_back_exactly() -> None:
    text = "  Hello,  wide\nworld  "
    assert split_words(text) == ["  Hello,  ", "wide\n", "world  "]
    assert "".join(split_words(text)) == text
