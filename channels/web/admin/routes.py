"""The console's routes: the login page, one page shell, its static files and a JSON API.

Every route except the login page requires the admin token (`AdminAuth.require`); the page
shell redirects to the login page instead of answering 401, the rest answer 401. The
pages are rendered in the browser from the JSON API (`static/admin.js`), which scripts
can call with a bearer header.
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Form, HTTPException, Query, Request, status
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel

from bot.console import Console
from bot.errors import ChorusError, NotFound
from channels.web.admin.auth import COOKIE_MAX_AGE, COOKIE_NAME, AdminAuth, same_origin
from channels.web.bundles import Asset, console_script, console_style

STATIC = Path(__file__).parent / "static"
STATIC_FILES = {"admin.js": "text/javascript", "admin.css": "text/css"}
# The reply renderer and its libraries, shared with the widget (channels/web/bundles.py).
BUNDLES: dict[str, Callable[[], Asset]] = {"render.js": console_script, "render.css": console_style}
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# The login page is the one page served before authentication: no script at all.
LOGIN_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

T = TypeVar("T")


class PersonaChoice(BaseModel):
    persona_id: str


class ApprovalChoice(BaseModel):
    approve: bool


def public_routes(auth: AdminAuth) -> APIRouter:
    """The login form, and the page shell that sends strangers to it."""
    router = APIRouter(prefix="/admin", include_in_schema=False)

    @router.get("/login")
    async def login_page() -> HTMLResponse:
        return _login_page("")

    @router.post("/login")
    async def login(request: Request, token: Annotated[str, Form()] = "") -> Response:
        if not same_origin(request):
            return _login_page(
                "This form must be sent from the console's own page.", status.HTTP_403_FORBIDDEN
            )
        if not auth.token_matches(token.strip()):
            return _login_page("That is not the admin token.", status.HTTP_401_UNAUTHORIZED)
        response = RedirectResponse("/admin", status.HTTP_303_SEE_OTHER)
        response.set_cookie(
            COOKIE_NAME,
            auth.new_cookie(),
            max_age=COOKIE_MAX_AGE,
            path="/admin",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    @router.get("")
    async def shell(request: Request) -> Response:
        principal = auth.principal(request)
        if principal is None:
            return RedirectResponse("/admin/login", status.HTTP_303_SEE_OTHER)
        page = (STATIC / "admin.html").read_text(encoding="utf-8")
        page = page.replace("{{csrf_token}}", html.escape(principal.csrf_token))
        headers = {**PAGE_HEADERS, "Content-Security-Policy": PAGE_POLICY}
        return HTMLResponse(page, headers=headers)

    return router


def protected_routes(console: Console, auth: AdminAuth) -> APIRouter:
    """Everything else: every route requires `AdminAuth.require`."""
    router = APIRouter(prefix="/admin", include_in_schema=False, dependencies=[Depends(auth.require)])

    @router.post("/logout")
    async def logout() -> Response:
        response = Response(status_code=status.HTTP_204_NO_CONTENT)
        response.delete_cookie(COOKIE_NAME, path="/admin")
        return response

    @router.get("/static/{name}")
    async def static_file(name: str, request: Request) -> Response:
        if name in BUNDLES:
            return BUNDLES[name]().response(request)
        if name not in STATIC_FILES:
            raise HTTPException(status.HTTP_404_NOT_FOUND)
        return FileResponse(
            STATIC / name,
            media_type=f"{STATIC_FILES[name]}; charset=utf-8",
            headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
        )

    @router.get("/api/conversations")
    async def conversations(q: str = "") -> list[dict[str, Any]]:
        return await console.conversations(q)

    @router.get("/api/conversations/{session_id}/transcript")
    async def transcript(session_id: str) -> dict[str, Any]:
        return await _found(console.transcript(session_id))

    @router.get("/api/conversations/{session_id}/context")
    async def context(session_id: str) -> dict[str, Any]:
        try:
            return await console.context(session_id)
        except NotFound as error:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(error)) from error

    @router.post("/api/conversations/{session_id}/persona")
    async def switch_persona(session_id: str, choice: PersonaChoice) -> dict[str, str]:
        try:
            persona_id = await console.switch_persona(session_id, choice.persona_id)
        except NotFound as error:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(error)) from error
        except ChorusError as error:
            raise HTTPException(HTTPStatus.UNPROCESSABLE_ENTITY, str(error)) from error
        return {"persona_id": persona_id}

    @router.get("/api/attachments/{attachment_id}")
    async def attachment_file(attachment_id: int) -> FileResponse:
        path, mime_type, _text = await _found(console.attachment(attachment_id))
        # Stored files are shown, never run: no sniffing, and a sandbox for anything opened directly.
        return FileResponse(
            path,
            media_type=mime_type,
            headers={"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"},
        )

    @router.get("/api/attachments/{attachment_id}/text")
    async def attachment_text(attachment_id: int) -> dict[str, str | None]:
        _path, _mime, text = await _found(console.attachment(attachment_id))
        return {"text": text}

    @router.get("/api/memory")
    async def memory(q: str = "", session: Annotated[str | None, Query()] = None) -> list[dict[str, Any]]:
        return await _found(console.memory(q, session))

    @router.post("/api/memory/{item_id}/forget")
    async def forget(item_id: int) -> dict[str, int]:
        await _found(console.forget(item_id))
        return {"forgotten": item_id}

    @router.get("/api/pairings")
    async def pairings() -> list[dict[str, Any]]:
        return await console.pairings()

    @router.post("/api/pairings/{code}/approve")
    async def approve_pairing(code: str) -> dict[str, str]:
        return await _found(console.approve_pairing(code))

    @router.get("/api/personas")
    async def personas() -> list[dict[str, Any]]:
        return await console.personas()

    @router.get("/api/tool-calls")
    async def tool_calls(before: int | None = None) -> dict[str, Any]:
        return await console.tool_calls(before)

    @router.post("/api/approvals/{approval_id}")
    async def decide(approval_id: int, choice: ApprovalChoice) -> dict[str, Any]:
        try:
            return await console.decide(approval_id, choice.approve)
        except NotFound as error:
            raise HTTPException(status.HTTP_404_NOT_FOUND, str(error)) from error

    @router.get("/api/health")
    async def health() -> dict[str, Any]:
        return console.health()

    return router


async def _found(read: Awaitable[T]) -> T:
    """What `read` gives; NotFound becomes a 404."""
    try:
        return await read
    except NotFound as error:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(error)) from error


def _login_page(error: str, status_code: int = status.HTTP_200_OK) -> HTMLResponse:
    page = (STATIC / "login.html").read_text(encoding="utf-8")
    notice = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    headers = {**PAGE_HEADERS, "Content-Security-Policy": LOGIN_POLICY}
    return HTMLResponse(page.replace("{{error}}", notice), status_code=status_code, headers=headers)
