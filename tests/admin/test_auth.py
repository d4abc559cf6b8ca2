"""Only the admin token opens the console and /metrics: by bearer header, or a login cookie
with CSRF protection on every change."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIRoute

from bot.runtime import Runtime
from channels.web.admin import admin_routers
from channels.web.admin.auth import AdminAuth
from channels.web.app import create_app
from tests.admin.conftest import BASE_URL
from tests.admin.seed import ADMIN_TOKEN, BEARER, admin_runtime, seed
from tests.support.runtime import make_runtime

PUBLIC = {("GET", "/admin/login"), ("POST", "/admin/login"), ("GET", "/admin")}


def admin_routes(runtime: Runtime) -> list[tuple[str, str]]:
    """(method, path) of every route the console and /metrics add to the app."""
    found = []
    for router in admin_routers(runtime, AdminAuth(ADMIN_TOKEN)):
        for route in router.routes:
            assert isinstance(route, APIRoute)
            found.extend((method, route.path) for method in sorted(route.methods))
    return found


def concrete(path: str, session_id: str) -> str:
    """A real URL for a route pattern: an existing session, ids that exist or not."""
    path = path.replace("{session_id}", session_id).replace("{name}", "admin.js")
    return re.sub(r"\{\w+\}", "1", path)


async def test_every_admin_route_refuses_without_the_token(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    seeded = await seed(runtime)
    routes = admin_routes(runtime)
    # The console really is mounted: pages, API, files, changes and metrics.
    paths = {path for _, path in routes}
    assert {"/admin/api/conversations", "/admin/api/memory/{item_id}/forget", "/metrics"} <= paths
    assert len(routes) >= 15
    for method, path in routes:
        if (method, path) in PUBLIC:
            continue
        url = concrete(path, seeded.private_id)
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token"},
            {"Authorization": f"Basic {ADMIN_TOKEN}"},
        ):
            response = await client.request(method, url, headers=headers, json={"persona_id": "captain"})
            assert response.status_code == 401, (method, url, headers, response.status_code)
            assert seeded.private_id not in response.text
        # With the token the same request gets past authentication.
        allowed = await client.request(method, url, headers=BEARER, json={"persona_id": "captain"})
        assert allowed.status_code != 401, (method, url)
    # Nothing was changed by the refused requests.
    session = runtime.stores.sessions.get_session(seeded.private_id)
    assert session is not None and session.persona_id == "captain"  # by the allowed request only


async def test_the_page_shell_sends_strangers_to_the_login_page(client: httpx.AsyncClient) -> None:
    response = await client.get("/admin")
    assert response.status_code == 303 and response.headers["location"] == "/admin/login"
    login = await client.get("/admin/login")
    assert login.status_code == 200 and 'name="token"' in login.text
    assert "script" not in login.text.lower()


async def test_login_sets_an_httponly_strict_cookie_not_the_token(client: httpx.AsyncClient) -> None:
    wrong = await client.post("/admin/login", data={"token": "guess"})
    assert wrong.status_code == 401 and "not the admin token" in wrong.text
    assert "chorus_admin" not in wrong.headers.get("set-cookie", "")
    response = await client.post("/admin/login", data={"token": ADMIN_TOKEN})
    assert response.status_code == 303 and response.headers["location"] == "/admin"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/admin" in cookie
    assert ADMIN_TOKEN not in cookie
    shell = await client.get("/admin")
    assert shell.status_code == 200
    assert "script-src 'self'" in shell.headers["content-security-policy"]
    assert (await client.get("/admin/api/conversations")).status_code == 200


async def test_a_cookie_change_needs_the_csrf_token_and_the_same_origin(
    runtime: Runtime, client: httpx.AsyncClient
) -> None:
    seeded = await seed(runtime)
    await client.post("/admin/login", data={"token": ADMIN_TOKEN})
    csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', (await client.get("/admin")).text)
    assert csrf is not None
    url = f"/admin/api/conversations/{seeded.private_id}/persona"
    body = {"persona_id": "captain"}
    assert (await client.post(url, json=body)).status_code == 401
    assert (await client.post(url, json=body, headers={"X-CSRF-Token": "0" * 64})).status_code == 401
    foreign = {"X-CSRF-Token": csrf.group(1), "Origin": "https://evil.example"}
    assert (await client.post(url, json=body, headers=foreign)).status_code == 401
    session = runtime.stores.sessions.get_session(seeded.private_id)
    assert session is not None and session.persona_id == "sage"
    own = {"X-CSRF-Token": csrf.group(1), "Origin": BASE_URL}
    assert (await client.post(url, json=body, headers=own)).status_code == 200
    session = runtime.stores.sessions.get_session(seeded.private_id)
    assert session is not None and session.persona_id == "captain"


async def test_a_login_form_posted_from_another_origin_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/admin/login", data={"token": ADMIN_TOKEN}, headers={"Origin": "https://evil.example"}
    )
    assert response.status_code == 403 and "chorus_admin" not in response.headers.get("set-cookie", "")


async def test_a_forged_or_expired_cookie_is_refused(runtime: Runtime, client: httpx.AsyncClient) -> None:
    other = AdminAuth("another-deployment-token").new_cookie()
    client.cookies.set("chorus_admin", other, path="/admin")
    assert (await client.get("/admin/api/conversations")).status_code == 401
    issued, nonce, _ = AdminAuth(ADMIN_TOKEN).new_cookie().split(".")
    client.cookies.set("chorus_admin", f"{issued}.{nonce}.{'0' * 64}", path="/admin")
    assert (await client.get("/admin/api/conversations")).status_code == 401


@pytest.mark.parametrize("setting", [{}, {"channels_web_admin_token": ""}])
async def test_without_a_token_there_is_no_console_and_no_metrics(
    tmp_path: Path, setting: dict[str, str]
) -> None:
    runtime = make_runtime(tmp_path, **setting)
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(runtime)), base_url=BASE_URL
        ) as http:
            for url in ("/admin", "/admin/login", "/admin/api/conversations", "/metrics"):
                assert (await http.get(url)).status_code == 404, url
    finally:
        await runtime.aclose()


async def test_chorus_admin_token_environment_variable_turns_the_console_on(tmp_path: Path) -> None:
    from bot.config import load_settings

    settings = load_settings(tmp_path / "absent.yaml", {"CHORUS_ADMIN_TOKEN": "from-env"})
    assert settings.channels.web.admin_token is not None
    assert settings.channels.web.admin_token.get_secret_value() == "from-env"


async def test_metrics_can_be_opened_to_scrapers_while_the_console_stays_closed(tmp_path: Path) -> None:
    runtime = admin_runtime(tmp_path, channels_web_metrics_public="true")
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(runtime)), base_url=BASE_URL
        ) as http:
            assert (await http.get("/metrics")).status_code == 200
            assert (await http.get("/admin/api/conversations")).status_code == 401
    finally:
        await runtime.aclose()
