"""The operator's console at /admin and the Prometheus endpoint at /metrics.

Both are served only when an admin token is configured (`channels.web.admin_token` or
`CHORUS_ADMIN_TOKEN`) and refuse every request without it; `/metrics` may be opened to
scrapers without a token by `channels.web.metrics_public`. What the pages show and do
comes from `bot.console`; this package owns authentication, routes and the page assets.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import Response

from bot import metrics
from bot.console import Console, job_queue_depth
from bot.runtime import Runtime
from channels.web.admin.auth import AdminAuth
from channels.web.admin.routes import protected_routes, public_routes

__all__ = ["admin_routers", "mount_admin"]


def mount_admin(app: FastAPI, runtime: Runtime) -> None:
    """Adds /admin and /metrics to `app` when an admin token is set; nothing otherwise."""
    web = runtime.settings.channels.web
    if web.admin_token is None or not web.admin_token.get_secret_value():
        return
    for router in admin_routers(runtime, AdminAuth(web.admin_token.get_secret_value())):
        app.include_router(router)


def admin_routers(runtime: Runtime, auth: AdminAuth) -> list[APIRouter]:
    """Every router of the console and /metrics, each holding its routes directly."""
    console = Console(runtime)
    return [
        public_routes(auth),
        protected_routes(console, auth),
        metrics_router(runtime, auth, public=runtime.settings.channels.web.metrics_public),
    ]


def metrics_router(runtime: Runtime, auth: AdminAuth, *, public: bool) -> APIRouter:
    dependencies = [] if public else [Depends(auth.require)]
    router = APIRouter(include_in_schema=False, dependencies=dependencies)
    queue = metrics.GaugeReader(
        [("chorus_job_queue_depth", "After-turn jobs due or running.", lambda: job_queue_depth(runtime))]
    )

    @router.get("/metrics")
    async def scrape() -> Response:
        return Response(metrics.render(queue), media_type=metrics.CONTENT_TYPE)

    return router
