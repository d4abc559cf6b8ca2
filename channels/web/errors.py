"""One error body for the whole API, and the OpenAPI description of each status.

FastAPI answers validation errors with a list and everything else with a string;
clients get `{"detail": str, "errors": [...] | null}` for both.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from channels.web.schemas import ErrorBody, FieldProblem

CANDIDATE_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
WHY = {
    400: "The request body could not be parsed.",
    401: "No valid visitor token: start with `POST /api/session`.",
    403: "The conversation or file belongs to someone else, or a cookie write came from a foreign origin.",
    404: "There is no such conversation or file.",
    409: "This conversation was replaced by a newer one (after /new or /link); reload it.",
    411: "A message upload must declare its Content-Length.",
    413: "Too large: a file, too many files, or an image with too many pixels.",
    415: "A file type that Chorus cannot read, or a body that is not a form.",
    422: "A field is missing, out of range or malformed (including text that is not UTF-8).",
    429: "Too many requests; wait the seconds in `Retry-After`.",
    502: "The speech service failed to speak the reply; try again later.",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The `responses=` entries for these statuses, all with the one error body."""
    return {code: {"model": ErrorBody, "description": WHY[code]} for code in codes}


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, validation_error)  # type: ignore[arg-type]


async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    detail = error.detail if isinstance(error.detail, str) else HTTPStatus(error.status_code).phrase
    headers = dict(error.headers or {})
    if error.status_code == status.HTTP_405_METHOD_NOT_ALLOWED:
        # Starlette names only the methods of the first route on the path; a path
        # served by two routes (GET and POST) must name both.
        headers["Allow"] = ", ".join(sorted(allowed_methods(request)))
    return JSONResponse(ErrorBody(detail=detail).model_dump(), status_code=error.status_code, headers=headers)


def allowed_methods(request: Request) -> set[str]:
    methods = set()
    for method in CANDIDATE_METHODS:
        scope = {**request.scope, "method": method}
        if any(route.matches(scope)[0] == Match.FULL for route in request.app.router.routes):
            methods.add(method)
    return methods


async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    problems = [
        FieldProblem(location=[str(part) for part in issue.get("loc", ())], message=str(issue.get("msg", "")))
        for issue in error.errors()
    ]
    summary = "; ".join(f"{'.'.join(problem.location)}: {problem.message}" for problem in problems)
    body = ErrorBody(detail=f"Invalid request — {summary}", errors=problems)
    return JSONResponse(body.model_dump(), status_code=status.HTTP_422_UNPROCESSABLE_CONTENT)
