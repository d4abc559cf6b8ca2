"""The scripts and styles the widget and the console load: composed from the vendored libraries,
each of which is listed with its version and licence, and served compressed and revalidated."""

from __future__ import annotations

import re

from channels.web.bundles import STATIC, VENDOR
from tests.admin.seed import BEARER
from tests.web.conftest import ClientFactory

# What each vendored file says about itself in its first lines.
VERSION_MARKS = {
    "marked.umd.js": r"marked v(\d+\.\d+\.\d+)",
    "purify.min.js": r"DOMPurify (\d+\.\d+\.\d+)",
    "highlight.min.js": r"Highlight\.js v(\d+\.\d+\.\d+)",
}


def test_every_vendored_file_is_listed_with_the_version_it_is_and_its_licence() -> None:
    listing = (VENDOR / "README.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1]: line for line in listing.splitlines() if line.startswith("| `")}
    shipped = sorted(path.name for path in VENDOR.iterdir() if path.suffix in (".js", ".css"))
    assert shipped == ["highlight-github.min.css", "highlight.min.js", "marked.umd.js", "purify.min.js"]
    for name, mark in VERSION_MARKS.items():
        [row] = [row for cell, row in rows.items() if f"`{name}`" in cell]
        version = re.search(mark, (VENDOR / name).read_text(encoding="utf-8")[:400])
        assert version is not None and f"| {version.group(1)} |" in row, name
        for licence in re.findall(r"`(LICENSE-[^`]+)`", row):
            assert (VENDOR / licence).stat().st_size > 500, licence
    assert "highlight-github.min.css" in listing


async def test_the_widget_is_one_script_with_its_libraries_compressed_and_revalidated(
    make_client: ClientFactory,
) -> None:
    client = await make_client()
    plain = await client.get("/widget.js", headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and plain.headers["content-type"].startswith("text/javascript")
    script = plain.text
    for library in ("marked v18", "DOMPurify 3", "Highlight.js v11"):
        assert library in script
    assert (STATIC / "render.js").read_text(encoding="utf-8") in script
    assert (STATIC / "widget.js").read_text(encoding="utf-8") in script
    # All inside one function: nothing is left on the embedding page's globals.
    assert script.startswith("(function () {") and script.rstrip().endswith("})();")
    assert "sourceMappingURL" not in script

    compressed = await client.get("/widget.js", headers={"Accept-Encoding": "gzip"})
    assert compressed.headers["content-encoding"] == "gzip"
    assert int(compressed.headers["content-length"]) < len(plain.content) / 2
    assert compressed.text == script
    again = await client.get("/widget.js", headers={"If-None-Match": plain.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


async def test_the_console_loads_the_same_renderer_and_styles(make_client: ClientFactory) -> None:
    client = await make_client(channels_web_admin_token="admin-token-for-tests-7f3a")
    script = await client.get("/admin/static/render.js", headers=BEARER)
    assert script.status_code == 200 and (STATIC / "render.js").read_text(encoding="utf-8") in script.text
    style = await client.get("/admin/static/render.css", headers=BEARER)
    assert style.headers["content-type"].startswith("text/css")
    assert (STATIC / "render.css").read_text(encoding="utf-8") in style.text
    assert (await client.get("/admin/static/render.js")).status_code == 401
