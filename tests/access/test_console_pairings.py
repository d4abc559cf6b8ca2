"""The operator's console lists the strangers waiting with a pairing code and approves one."""

from __future__ import annotations

from pathlib import Path

import httpx

from channels.web.app import create_app
from tests.access.test_pairing import code_in, stranger
from tests.admin.seed import BEARER, admin_runtime


async def test_the_console_lists_waiting_codes_and_approves_one(tmp_path: Path) -> None:
    runtime = admin_runtime(tmp_path, channels_telegram_access_admins=["777"])
    try:
        code = code_in((await runtime.engine.respond(stranger("hi"))).text)
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
            assert (await client.get("/admin/api/pairings")).status_code in (401, 303, 307)
            [waiting] = (await client.get("/admin/api/pairings", headers=BEARER)).json()
            assert (waiting["code"], waiting["lane"], waiting["user_id"], waiting["name"]) == (
                code,
                "telegram",
                "501",
                "Mallory",
            )
            missing = await client.post("/admin/api/pairings/NOPE42/approve", headers=BEARER)
            assert missing.status_code == 404
            approved = await client.post(f"/admin/api/pairings/{code}/approve", headers=BEARER)
            assert approved.json() == {"lane": "telegram", "user_id": "501", "name": "Mallory"}
            assert (await client.get("/admin/api/pairings", headers=BEARER)).json() == []

        assert (await runtime.engine.respond(stranger("hello again"))).kind == "assistant"
    finally:
        await runtime.aclose()
