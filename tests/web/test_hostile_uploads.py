"""Decompression bombs, odd encodings and control characters, as a stranger would send them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.files import png_image
from tests.web.conftest import ClientFactory
from tests.web.helpers import WebVisitor

REPO = Path(__file__).resolve().parents[2]
# Decoding one 12000×12000 bomb alone takes over 500 MiB; refusing from the header takes nothing.
FLAT_MIB = 60


def test_image_bombs_are_refused_from_the_header_and_memory_stays_flat(tmp_path: Path) -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "tests.web.bomb_probe", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    assert result["warm_status"] == 200
    assert len(result["web"]) == 6
    for status, detail in result["web"]:
        assert status == 413 and "megapixels" in detail, detail
    assert any("12,000×12,000 pixels" in detail for _, detail in result["web"])
    for kind, text in result["lanes"]:
        assert kind == "error" and "megapixels" in text, text
    # Only the warm-up message was stored.
    assert result["stored_user_messages"] == 1
    assert result["after_mib"] - result["before_mib"] < FLAT_MIB, result


async def test_a_large_photo_is_downscaled_for_the_model(client: httpx.AsyncClient) -> None:
    visitor = await WebVisitor.start(client)
    events = await visitor.say("look", files=[("files", ("wide.png", png_image(3000, 2000), "image/png"))])
    assert events[-1].name == "done"
    runtime = client.runtime  # type: ignore[attr-defined]
    [model_copy] = list((runtime.settings.data_dir / "attachments").rglob("*.model.jpg"))
    from PIL import Image

    with Image.open(model_copy) as image:
        assert max(image.size) == runtime.settings.limits.image_max_side


async def test_image_limit_is_a_setting(make_client: ClientFactory) -> None:
    client = await make_client(limits_image_max_pixels=10_000)
    visitor = await WebVisitor.start(client)
    refused = await visitor.post_message("x", files=[("files", ("p.png", png_image(200, 100), "image/png"))])
    assert refused.status_code == 413 and "200×100 pixels" in refused.json()["detail"]
    accepted = await visitor.post_message("x", files=[("files", ("p.png", png_image(100, 100), "image/png"))])
    assert accepted.status_code == 200
