"""Who may use the console: the holder of the admin token, by cookie or bearer header.

People log in once with the token and get a signed, HttpOnly, SameSite=Strict cookie
(never the token itself). Scripts send `Authorization: Bearer <token>`. A request that
changes something with the cookie must also carry the page's CSRF token in a header and,
when the browser names one, come from the console's own origin; a bearer request needs
neither, since no browser attaches that header on its own.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Literal

from fastapi import HTTPException, Request, status

COOKIE_NAME = "chorus_admin"
CSRF_HEADER = "X-CSRF-Token"
# A login lasts a working day; logging in again costs one paste of the token.
COOKIE_MAX_AGE = 12 * 3600
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Principal:
    via: Literal["bearer", "cookie"]
    csrf_token: str  # empty for bearer requests


class AdminAuth:
    def __init__(self, token: str) -> None:
        self._token = token.encode()

    def token_matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode(), self._token)

    def new_cookie(self) -> str:
        issued = str(int(time.time()))
        nonce = secrets.token_urlsafe(18)
        return f"{issued}.{nonce}.{self._sign('login', issued, nonce)}"

    def cookie_valid(self, value: str) -> bool:
        parts = value.split(".")
        if len(parts) != 3 or not parts[0].isdigit():
            return False
        issued, nonce, mac = parts
        if not hmac.compare_digest(mac, self._sign("login", issued, nonce)):
            return False
        return 0 <= time.time() - int(issued) <= COOKIE_MAX_AGE

    def csrf_for(self, cookie: str) -> str:
        return self._sign("csrf", cookie)

    def principal(self, request: Request) -> Principal | None:
        """The authenticated caller, or None; unsafe cookie requests must pass the CSRF checks."""
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credentials:
            return Principal("bearer", "") if self.token_matches(credentials.strip()) else None
        cookie = request.cookies.get(COOKIE_NAME, "")
        if not cookie or not self.cookie_valid(cookie):
            return None
        csrf = self.csrf_for(cookie)
        if request.method not in SAFE_METHODS:
            sent = request.headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), csrf.encode()) or not same_origin(request):
                return None
        return Principal("cookie", csrf)

    def require(self, request: Request) -> Principal:
        principal = self.principal(request)
        if principal is None:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "Admin token required (log in at /admin/login, or send Authorization: Bearer).",
                headers={"WWW-Authenticate": 'Bearer realm="chorus-admin"'},
            )
        return principal

    def _sign(self, purpose: str, *parts: str) -> str:
        message = "|".join((purpose, *parts)).encode()
        return hmac.new(self._token, message, hashlib.sha256).hexdigest()


def same_origin(request: Request) -> bool:
    """False when the browser says the request came from another origin."""
    origin = request.headers.get("origin")
    if origin is not None:
        host = request.headers.get("host", "")
        return origin in (f"http://{host}", f"https://{host}")
    # No Origin header (older browsers, scripts): Fetch Metadata, when sent, must agree.
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")
