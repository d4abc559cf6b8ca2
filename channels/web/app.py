"""`create_app(runtime)`: the one FastAPI app that `chorus serve` runs with uvicorn."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from bot.app import Runtime
from channels.web import api, pages
from channels.web.admin import mount_admin
from channels.web.docs import mount_docs
from channels.web.errors import install_error_handlers
from channels.web.lane import WebLane
from channels.web.schemas import Health


def create_app(runtime: Runtime) -> FastAPI:
    """/healthz always (other lanes mount webhooks here); chat API and widget when enabled."""
    web = runtime.settings.channels.web
    app = FastAPI(
        title="Chorus",
        summary="One conversation, many lanes, many voices: the web chat API.",
        docs_url=None,
    )
    mount_docs(app)
    install_error_handlers(app)

    @app.get("/healthz", response_model=Health, tags=["service"])
    async def healthz() -> Health:
        return Health(status="ok", model=runtime.engine.provider.name)

    mount_admin(app, runtime)
    if not web.enabled:
        return app
    app.state.web_lane = WebLane.build(runtime)
    app.include_router(api.router)
    complete_openapi(app, runtime)
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
