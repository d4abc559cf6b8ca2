"""Upload decompression bombs to a real app in this process and report peak memory.

Run as `python -m tests.web.bomb_probe DIR`; prints one JSON line. A subprocess keeps
the measurement free of whatever else the test run has allocated.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
from pathlib import Path
from typing import Any

import httpx

from channels.web.app import create_app
from tests.support.files import png_bomb, png_image
from tests.support.runtime import attachment, inbound, make_runtime

BOMBS = {"12k.png": png_bomb(12_000, 12_000), "20k.png": png_bomb(20_000, 20_000)}


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def probe(directory: Path) -> dict[str, Any]:
    runtime = make_runtime(directory)
    app = create_app(runtime)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://chat.test"
    ) as client:
        token = (await client.post("/api/session", json={})).json()["token"]
        client.cookies.clear()
        headers = {"Authorization": f"Bearer {token}"}
        session_id = (await client.get("/api/session", headers=headers)).json()["session_id"]

        async def upload(name: str, data: bytes) -> httpx.Response:
            return await client.post(
                f"/api/sessions/{session_id}/messages",
                headers=headers,
                data={"text": "look"},
                files=[("files", (name, data, "image/png"))],
            )

        # Warm up every code path with a normal image first, so only the bombs are measured.
        warm = await upload("small.png", png_image(800, 600))
        before = peak_mib()
        web = await asyncio.gather(*(upload(name, data) for name, data in BOMBS.items() for _ in range(3)))
        # Telegram and Discord hand images to the engine directly: the same ingest refuses them.
        lanes = [
            await runtime.engine.respond(
                inbound(
                    "look",
                    lane=lane,
                    user_id=f"{lane}-user",
                    attachments=(attachment(name, "image/png", data, "image"),),
                )
            )
            for lane in ("telegram", "discord")
            for name, data in BOMBS.items()
        ]
        after = peak_mib()
    stored = runtime.stores.messages.messages(session_id)
    await runtime.aclose()
    return {
        "warm_status": warm.status_code,
        "web": [(response.status_code, response.json()["detail"]) for response in web],
        "lanes": [(reply.kind, reply.text) for reply in lanes],
        "stored_user_messages": sum(1 for row in stored if row.role == "user"),
        "before_mib": before,
        "after_mib": after,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(probe(Path(sys.argv[1])))))
