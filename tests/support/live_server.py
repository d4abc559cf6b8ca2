"""Run the web app on 127.0.0.1 inside the test's event loop (browser and contract tests)."""

from __future__ import annotations

import asyncio
import socket
from types import TracebackType

import uvicorn
from fastapi import FastAPI


class LiveServer:
    """`async with LiveServer(app) as server:` serves on a free port at `server.base_url`."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.host, self.port = self.socket.getsockname()[:2]
        self.app = app
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._task: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def __aenter__(self) -> LiveServer:
        self._task = asyncio.create_task(self.server.serve(sockets=[self.socket]))
        while not self.server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # As `chorus serve` does before it stops: a page left open keeps its push stream,
        # which the server's shutdown would otherwise wait for.
        web_lane = getattr(self.app.state, "web_lane", None)
        if web_lane is not None:
            web_lane.pushes.close()
        self.server.should_exit = True
        if self._task is not None:
            await self._task
        self.socket.close()
