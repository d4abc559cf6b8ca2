"""Shared helpers for the benchmarks: timing percentiles, peak RSS, tables, LoCoMo data."""

from __future__ import annotations

import json
import os
import resource
import statistics
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parents[1]


def _locomo_dir() -> Path:
    """`CHORUS_LOCOMO_DIR`, or the nearest `shared/data/locomo` above the checkout."""
    if os.environ.get("CHORUS_LOCOMO_DIR"):
        return Path(os.environ["CHORUS_LOCOMO_DIR"])
    for folder in REPO.parents:
        if (folder / "shared" / "data" / "locomo").is_dir():
            return folder / "shared" / "data" / "locomo"
    return REPO.parent / "shared" / "data" / "locomo"


LOCOMO_DIR = _locomo_dir()


def percentile(samples: Sequence[float], share: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))
    return ordered[index]


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB.

    VmHWM rather than ru_maxrss: Linux carries ru_maxrss across exec, so a
    subprocess would report its parent's peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def markdown_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    headers = list(rows[0])
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(header)) for header in headers) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def locomo_files() -> list[Path]:
    return sorted(LOCOMO_DIR.glob("*.json"))


def locomo_turns(path: Path) -> Iterator[dict[str, Any]]:
    """Every turn of one LoCoMo conversation in order: speaker, text, session index, caption."""
    data = json.loads(path.read_text(encoding="utf-8"))
    index = 1
    while f"session_{index}" in data:
        for turn in data[f"session_{index}"]:
            yield {
                "speaker": turn["speaker"],
                "text": turn.get("text", ""),
                "session": index,
                "caption": turn.get("blip_caption"),
            }
        index += 1


def fresh_database(admin_url: str, prefix: str = "chorus_bench") -> str:
    """The URL of a new, empty PostgreSQL database on the server `admin_url` reaches."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(
        make_url(admin_url).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, url: str) -> None:
    admin = create_engine(
        make_url(admin_url).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    admin.dispose()
