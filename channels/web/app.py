"""The one FastAPI app that `chorus serve` runs with uvicorn, and the web lane mounted on it.

`create_host_app` is the bare app every lane mounts onto (/healthz, API docs);
`WebRunner.mount` adds the chat API and widget; `create_app` is both at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Response
from fastapi.middleware.cors import CORSMiddleware

from bot.recovery import Delivery
from bot.runtime import Runtime
from bot.turns.events import TurnEvent
from channels.web import api, pages
from channels.web.admin import mount_admin
from channels.web.admission import SetupSlots
from channels.web.docs import mount_docs
from channels.web.errors import install_error_handlers
from channels.web.lane import WebLane
from channels.web.pushes import WebReminders
from channels.web.schemas import Health, LaneHealthView, McpServerHealthView


def create_host_app(runtime: Runtime) -> FastAPI:
    """/healthz always (lanes mount their webhooks and pages here)."""
    app = FastAPI(
        title="Chorus",
        summary="One conversation, many lanes, many voices: the web chat API.",
        docs_url=None,
    )
    mount_docs(app)
    install_error_handlers(app)

    @app.get(
        "/healthz",
        response_model=Health,
        tags=["service"],
        responses={503: {"model": Health, "description": "A lane has failed; `lanes` says why."}},
    )
    async def healthz(response: Response) -> Health:
        lanes = runtime.lanes.snapshot()
        failed = runtime.lanes.any_failed()
        if failed:
            # Supervisors watch the status code: a failed lane needs the operator.
            response.status_code = 503
        return Health(
            status="failed" if failed else "ok",
            model=runtime.engine.provider.name,
            lanes={
                name: LaneHealthView(state=status.state, reason=status.reason, since=status.since)
                for name, status in lanes.items()
            },
            mcp_servers={
                server.name: McpServerHealthView.model_validate(server, from_attributes=True)
                for server in runtime.mcp_servers.health()
            },
        )

    mount_admin(app, runtime)
    app.add_middleware(SetupSlots, slots=runtime.settings.channels.web.requests_setting_up)
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
        self.lane: WebLane | None = None

    def mount(self, app: FastAPI) -> None:
        web = self.runtime.settings.channels.web
        lane = self.lane = app.state.web_lane = WebLane.build(self.runtime)
        # Mounted is running: the lane has no platform to reach, and whatever asks /healthz
        # is answered by the server that serves its routes.
        self.runtime.lanes.running(self.name)
        # Reminders set on the web are shown to its open widgets when they fall due.
        self.runtime.reminders.lanes.register(self.name, WebReminders(lane.pushes))
        app.include_router(api.router)
        complete_openapi(app, self.runtime)
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

    async def stop_intake(self) -> None:
        """Shutting down: open push streams end, so the server need not wait for them."""
        if self.lane is not None:
            self.lane.pushes.close()

    async def stop(self) -> None:
        """Nothing of its own to stop: the server stops with `chorus serve`."""

    async def resume(self, delivery: Delivery, events: AsyncIterator[TurnEvent]) -> None:
        """A recovered web turn: its stream is gone, so the reply is only stored; the
        visitor finds it in the conversation's history."""
        async for _ in events:
            pass


def complete_openapi(app: FastAPI, runtime: Runtime) -> None:
    """What FastAPI cannot infer: the SSE event models (no route returns them as JSON) and persona ids."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in api.EVENT_MODELS.values():
                components[model.__name__] = model.model_json_schema(
                    ref_template="#/components/schemas/{model}"
                )
            # The persona picker's choices are the configured personas.
            choice = components["SwitchPersona"]["properties"]["persona_id"]
            choice["enum"] = [persona.id for persona in runtime.engine.personas]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
