"""The one FastAPI app that `chorus serve` runs with uvicorn, and the web lane mounted on it.

`create_host_app` is the bare app every lane mounts onto (/healthz, API docs);
`WebRunner.mount` adds the chat API and widget; `create_app` is both at once.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from bot.runtime import Runtime
from channels.web import api, pages
from channels.web.docs import mount_docs
from channels.web.lane import WebLane
from channels.web.schemas import Health


def create_host_app(runtime: Runtime) -> FastAPI:
    """/healthz always (lanes mount their webhooks and pages here)."""
    app = FastAPI(
        title="Chorus",
        summary="One conversation, many lanes, many voices: the web chat API.",
        docs_url=None,
    )
    mount_docs(app)

    @app.get("/healthz", response_model=Health, tags=["service"])
    async def healthz() -> Health:
        return Health(status="ok", model=runtime.engine.provider.name)

    return app


def create_app(runtime: Runtime) -> FastAPI:
    """The host app with the chat API and widget when the web lane is enabled."""
    app = create_host_app(runtime)
    if runtime.settings.channels.web.enabled:
        WebRunner(runtime).mount(app)
    return app


class WebRunner:
    """The web lane for `chorus serve`: routes on the host app, nothing to start or stop."""

    name = "web"

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def mount(self, app: FastAPI) -> None:
        web = self.runtime.settings.channels.web
        app.state.web_lane = WebLane.build(self.runtime)
        app.include_router(api.router)
        app.include_router(pages.router)
        if web.cors_origins:
            # Embedding pages authenticate with the bearer token, so no credentials cross origins.
            app.add_middleware(
                CORSMiddleware,
                allow_origins=web.cors_origins,
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type"],
                max_age=600,
            )

    async def start(self) -> None:
        """The web lane is served by the host app's server."""

    async def stop(self) -> None:
        """Nothing of its own to stop: the server stops with `chorus serve`."""
