"""The scripts and styles browsers load, composed once per process from Chorus's own files and
the vendored libraries (`static/vendor/README.md` names each, with its version and licence).

The widget stays one `<script>` tag for the pages that embed it: `/widget.js` carries the
libraries, the renderer (`static/render.js`, with its styles as a string for the widget's shadow
root) and the widget, all inside one function, so nothing is left on the embedding page's
globals and its own copies of these libraries are never touched. The console, on its own page,
loads the libraries and the renderer as one script and their styles as one sheet.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

from fastapi import Request
from fastapi.responses import Response

STATIC = Path(__file__).parent / "static"
VENDOR = STATIC / "vendor"
# The libraries render.js is written against, each under the name it uses.
LIBRARIES = (("marked", "marked.umd.js"), ("DOMPurify", "purify.min.js"), ("hljs", "highlight.min.js"))
STYLES = (VENDOR / "highlight-github.min.css", STATIC / "render.css")
# A vendored file's pointer to a source map Chorus does not serve.
_SOURCE_MAP = re.compile(r"^//# sourceMappingURL=.*$", re.MULTILINE)


@dataclass(frozen=True)
class Asset:
    """A composed file as served: its bytes, gzipped once, and a tag for revalidation."""

    body: bytes
    media_type: str

    @cached_property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:32] + '"'

    @cached_property
    def gzipped(self) -> bytes:
        return gzip.compress(self.body, compresslevel=9, mtime=0)

    def response(self, request: Request) -> Response:
        # no-cache: a browser asks again each load and gets a 304 while the file is unchanged,
        # so embedding pages pick up a new widget on their next load.
        headers = {
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
            "ETag": self.etag,
            "Vary": "Accept-Encoding",
        }
        if self.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        body = self.body
        if "gzip" in request.headers.get("accept-encoding", ""):
            body = self.gzipped
            headers["Content-Encoding"] = "gzip"
        return Response(body, media_type=self.media_type, headers=headers)


@cache
def widget_script() -> Asset:
    styles = json.dumps(_styles(), ensure_ascii=True)
    source = "\n".join(
        [
            "(function () {",
            _libraries(),
            f"var RENDER_CSS = {styles};",
            _read(STATIC / "render.js"),
            _read(STATIC / "widget.js"),
            "})();",
            "",
        ]
    )
    return Asset(source.encode(), "text/javascript; charset=utf-8")


@cache
def console_script() -> Asset:
    source = "\n".join([_libraries(), _read(STATIC / "render.js"), ""])
    return Asset(source.encode(), "text/javascript; charset=utf-8")


@cache
def console_style() -> Asset:
    return Asset(_styles().encode(), "text/css; charset=utf-8")


def _libraries() -> str:
    """Each library run as a CommonJS module, its exports bound to one local name."""
    return "\n".join(
        f"var {name} = (function (module) {{\nvar exports = module.exports, define;\n"
        f"{_SOURCE_MAP.sub('', _read(VENDOR / file))}\n;return module.exports;\n}})({{ exports: {{}} }});"
        for name, file in LIBRARIES
    )


def _styles() -> str:
    return "\n".join(_read(path) for path in STYLES)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")
