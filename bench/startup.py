"""Cold start: `chorus serve` until /healthz answers, `chorus sessions` and `chorus tools` until they exit.

Each run is a fresh Python process, as an operator would start it, on a SQLite database
that exists already or (the first start) is created and migrated. For scale, the same
table shows a bare `import sqlalchemy, sqlmodel` in a fresh process: a storage-only
command should cost at most about 1.5× that. Beside the wall time, the CPU time the
process used (user + system): on a machine other work loads, the wall time mostly says
how long the process waited for a CPU, and the CPU time is the figure that compares
(`chorus serve`'s includes its shutdown after /healthz answered).

    .venv/bin/python bench/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, markdown_table, median, percentile

# A loaded 2-core machine can take many seconds to import a platform library.
READY_SECONDS = 120.0


def _environ(data: Path, port: int = 0) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
    environ.update(
        CHORUS_CONFIG=str(data / "none.yaml"),
        CHORUS_DATABASE_URL=f"sqlite:///{data / 'chorus.db'}",
        CHORUS_DATA_DIR=str(data / "files"),
        CHORUS_LOG_LEVEL="WARNING",
    )
    if port:
        environ["CHORUS_CHANNELS_WEB_PORT"] = str(port)
    return environ


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _children_cpu() -> float:
    """CPU seconds (user + system) of the child processes that ended so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _timed(command: list[str], environ: dict[str, str] | None = None) -> tuple[float, float]:
    """The command run to its end: (wall seconds, CPU seconds)."""
    cpu, started = _children_cpu(), time.perf_counter()
    subprocess.run(command, cwd=REPO, env=environ, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started, _children_cpu() - cpu


def bare_import() -> tuple[float, float]:
    return _timed([sys.executable, "-c", "import sqlalchemy, sqlmodel"])


def _sessions(data: Path) -> tuple[float, float]:
    return _timed([sys.executable, "-m", "bot.cli", "sessions"], _environ(data))


def sessions_fresh() -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as data:
        return _sessions(Path(data))


def sessions_existing() -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as data:
        _sessions(Path(data))  # creates and migrates the database
        return _sessions(Path(data))


def tools_listing() -> tuple[float, float]:
    """`chorus tools` with the built-in tools only: it builds the runtime, so its imports count."""
    with tempfile.TemporaryDirectory() as data:
        return _timed([sys.executable, "-m", "bot.cli", "tools"], _environ(Path(data)))


def serve_to_healthy() -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as data:
        port = _free_port()
        cpu = _children_cpu()
        started = time.perf_counter()
        server = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "serve"],
            cwd=REPO,
            env=_environ(Path(data), port),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        healthy: float | None = None
        try:
            while healthy is None and time.perf_counter() - started < READY_SECONDS:
                if server.poll() is not None:
                    raise RuntimeError(f"chorus serve exited with {server.returncode}")
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
                        if answer.status == 200:
                            healthy = time.perf_counter() - started
                except (urllib.error.URLError, ConnectionError, TimeoutError):
                    time.sleep(0.02)
            if healthy is None:
                raise RuntimeError(f"chorus serve was not healthy within {READY_SECONDS:.0f} s")
        finally:
            server.terminate()
            server.wait(timeout=60)
        return healthy, _children_cpu() - cpu


def measure(runs: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    cases = [
        ("import sqlalchemy, sqlmodel (bare)", bare_import),
        ("chorus sessions (existing database)", sessions_existing),
        ("chorus sessions (new database: migrations run)", sessions_fresh),
        ("chorus tools (built-in tools, new database)", tools_listing),
        ("chorus serve → /healthz 200 (web lane)", serve_to_healthy),
    ]
    for name, run in cases:
        run()  # warm the file system cache, as a second start would
        samples = [run() for _ in range(runs)]
        walls = [wall for wall, _ in samples]
        cpus = [cpu for _, cpu in samples]
        rows.append(
            {
                "what": name,
                "runs": runs,
                "p50 s": median(walls),
                "max s": percentile(walls, 1.0),
                "p50 CPU s": median(cpus),
            }
        )
    bare = float(rows[0]["p50 s"])  # type: ignore[arg-type]
    bare_cpu = float(rows[0]["p50 CPU s"])  # type: ignore[arg-type]
    for row in rows:
        row["× bare import"] = float(row["p50 s"]) / bare  # type: ignore[arg-type]
        row["× bare, CPU"] = float(row["p50 CPU s"]) / bare_cpu  # type: ignore[arg-type]
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv or [])
    print(markdown_table(measure(args.runs)))


if __name__ == "__main__":
    main(sys.argv[1:])
