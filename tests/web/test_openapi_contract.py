"""The published OpenAPI document is the contract: schemathesis holds the running app to it.

Schemathesis's own command line runs against a live server on 127.0.0.1 with every
check, a bounded number of examples per operation and a fixed seed; the test fails
on any failure it reports.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import httpx

from channels.web.app import create_app
from tests.support.live_server import LiveServer
from tests.support.runtime import make_runtime
from tests.web.helpers import WebVisitor

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
# A well-formed upload can still be refused for what its files contain (random bytes
# named .png): 413 and 415 are documented outcomes of valid requests to that route.
CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "401", "403", "404", "409", "413", "415", "429"]

# More files than `maxItems` is refused as too large (413), as the API documents.
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
"""
# Enough examples per operation to reach every status, few enough for a loaded 2-core machine.
EXAMPLES = 30


async def test_every_operation_keeps_to_the_documented_contract(tmp_path: Path) -> None:
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    # Push streams end at once: the tool reads each response to its end.
    runtime = make_runtime(
        tmp_path, channels_web_rate_limit_per_minute=1_000_000, channels_web_push_stream_seconds=0.05
    )
    try:
        async with (
            LiveServer(create_app(runtime)) as server,
            httpx.AsyncClient(base_url=server.base_url) as client,
        ):
            token = (await client.post("/api/session", json={"name": "Schema"})).json()["token"]
            process = await asyncio.create_subprocess_exec(
                str(SCHEMATHESIS),
                "run",
                f"{server.base_url}/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                str(EXAMPLES),
                "--seed",
                "1",
                "--workers",
                "1",
                "--generation-database",
                "none",
                "--no-color",
                "--header",
                f"Authorization: Bearer {token}",
                "--request-timeout",
                "60",
                cwd=tmp_path,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            output, _ = await asyncio.wait_for(process.communicate(), timeout=900)
    finally:
        await runtime.aclose()
    report = output.decode(errors="replace")
    assert process.returncode == 0, report
    # Every operation was exercised, not skipped.
    selected = re.search(r"Selected: (\d+)/(\d+)", report)
    assert selected is not None and selected[1] == selected[2], report
    assert f"Tested: {selected[1]}" in report, report


async def test_openapi_documents_statuses_security_and_events(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    schemes = document["components"]["securitySchemes"]
    assert schemes["HTTPBearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "The visitor token from `POST /api/session`.",
    }
    post = document["paths"]["/api/sessions/{session_id}/messages"]["post"]
    assert {"HTTPBearer": []} in post["security"]
    assert set(post["responses"]) == {
        "200",
        "400",
        "401",
        "403",
        "404",
        "409",
        "411",
        "413",
        "415",
        "422",
        "429",
    }
    for code, response in post["responses"].items():
        if code != "200":
            assert response["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/ErrorBody"
            }
    events = post["responses"]["200"]["content"]["text/event-stream"]["schema"]["oneOf"]
    assert [event["properties"]["event"]["const"] for event in events] == [
        "delta",
        "thinking",
        "tool",
        "done",
        "error",
    ]
    for name in ("DeltaEvent", "ToolEvent", "DoneEvent", "ErrorEvent"):
        assert name in document["components"]["schemas"]


async def test_errors_have_one_shape_and_huge_numbers_are_not_server_errors(
    client: httpx.AsyncClient,
) -> None:
    visitor = await WebVisitor.start(client)
    for path in ("/api/attachments/99999999999999999999", "/api/attachments/0"):
        response = await visitor.get(path)
        assert response.status_code == 422
        body = response.json()
        assert set(body) == {"detail", "errors"} and body["errors"][0]["location"] == [
            "path",
            "attachment_id",
        ]
    page = await visitor.get(f"/api/sessions/{visitor.session_id}/messages", before=2**63, limit=10**30)
    assert page.status_code == 422 and "before" in page.json()["detail"]
    unknown = await visitor.get("/api/sessions/%00nope/messages")
    assert unknown.status_code == 404 and unknown.json() == {
        "detail": "There is no such conversation.",
        "errors": None,
    }
    not_allowed = await client.delete(f"/api/sessions/{visitor.session_id}/messages")
    assert not_allowed.status_code == 405 and not_allowed.headers["allow"] == "GET, POST"
