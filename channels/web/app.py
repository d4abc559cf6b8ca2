"""`create_app(runtime)`: the one FastAPI app that `chorus serve` runs with uvicorn."""

from __future__ import annotations

from fastapi import FastAPI, Response
from fastapi.middleware.cors import CORSMiddleware

from bot.app import Runtime
from channels.web import api, pages
from channels.web.docs import mount_docs
from channels.web.lane import WebLane
from channels.web.schemas import Health, LaneHealthView


def create_app(runtime: Runtime) -> FastAPI:
    """/healthz always (other lanes mount webhooks here); chat API and widget when enabled."""
    web = runtime.settings.channels.web
    app = FastAPI(
        title="Chorus",
        summary="One conversation, many lanes, many voices: the web chat API.",
        docs_url=None,
    )
    mount_docs(app)

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
        )

    if not web.enabled:
        return app
    app.state.web_lane = WebLane.build(runtime)
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
    return app
