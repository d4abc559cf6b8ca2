"""The lifecycle every protocol stand-in shares: an aiohttp app on a free 127.0.0.1 port."""

from __future__ import annotations

import socket
from types import TracebackType
from typing import Self

from aiohttp import web


class LocalServer:
    """Subclasses add their routes in `routes` and may end long handlers in `before_stop`."""

    # Handlers that hang on purpose are ended by `before_stop`, so shutdown stays short.
    shutdown_timeout = 1.0
    # Appended to the address, e.g. "/v1" for an OpenAI-compatible base URL.
    url_path = ""

    def __init__(self) -> None:
        self.base_url = ""
        self._runner: web.AppRunner | None = None

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def before_stop(self) -> None:
        """Release handlers that are waiting (hangs, long polls, sockets)."""

    async def start(self) -> None:
        app = web.Application()
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=self.shutdown_timeout)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}{self.url_path}"

    async def stop(self) -> None:
        await self.before_stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
