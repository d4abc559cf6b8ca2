"""Visitors and turns over the web API, as a browser or an API user drives them."""

from __future__ import annotations

from typing import Any

import httpx

from tests.web.conftest import Event, parse_events


class EventReader:
    """The events of a streamed reply, each as soon as its blank line has arrived."""

    def __init__(self, response: httpx.Response) -> None:
        self._text = response.aiter_text()
        self._pending = ""

    async def next(self) -> Event:
        while "\n\n" not in self._pending:
            self._pending += await anext(self._text)
        block, self._pending = self._pending.split("\n\n", 1)
        (event,) = parse_events(block)
        return event

    def __aiter__(self) -> EventReader:
        return self

    async def __anext__(self) -> Event:
        try:
            return await self.next()
        except StopAsyncIteration:
            if self._pending.strip():
                raise AssertionError(f"the stream ended inside an event: {self._pending!r}") from None
            raise


class WebVisitor:
    """One anonymous visitor, authenticated by its bearer token only."""

    def __init__(self, client: httpx.AsyncClient, state: dict[str, Any]) -> None:
        self.client = client
        self.token: str = state["token"]
        self.visitor_id: str = state["visitor_id"]
        self.session_id: str = state["session_id"]

    @classmethod
    async def start(cls, client: httpx.AsyncClient, name: str | None = None) -> WebVisitor:
        response = await client.post("/api/session", json={"name": name} if name else {})
        assert response.status_code == 200, response.text
        client.cookies.clear()
        return cls(client, response.json())

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.client.get(path, headers=self.headers, params=params)

    async def post_message(
        self,
        text: str,
        *,
        session_id: str | None = None,
        client_id: str | None = None,
        files: list[tuple[str, tuple[str, bytes, str]]] | None = None,
    ) -> httpx.Response:
        data = {"text": text}
        if client_id is not None:
            data["client_id"] = client_id
        return await self.client.post(
            f"/api/sessions/{session_id or self.session_id}/messages",
            headers=self.headers,
            data=data,
            files=files,
        )

    async def say(self, text: str, **kwargs: Any) -> list[Event]:
        response = await self.post_message(text, **kwargs)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        return parse_events(response.text)

    async def refresh(self) -> dict[str, Any]:
        response = await self.get("/api/session")
        assert response.status_code == 200, response.text
        state: dict[str, Any] = response.json()
        self.session_id = state["session_id"]
        return state

    async def history(self, **params: Any) -> dict[str, Any]:
        response = await self.get(f"/api/sessions/{self.session_id}/messages", **params)
        assert response.status_code == 200, response.text
        page: dict[str, Any] = response.json()
        return page
