"""config.yaml documents every setting: each field of the settings models has its line there.

A list of entries (personas) documents the optional fields of its entries in the comment
under its key, where no entry needs them.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from typing import Any

import yaml
from pydantic import BaseModel

from bot import lanes
from bot.config import settings_model
from tests.support.runtime import REPO_CONFIG

SHIPPED_TEXT = REPO_CONFIG.read_text(encoding="utf-8")
SHIPPED = yaml.safe_load(SHIPPED_TEXT)


def nested_model(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """The settings model a field holds (and whether it is a list of them), if it holds one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item, True
    return None


def comment_under(key: str) -> str:
    """The comment lines right under `key:` (or `key: []`, a list empty by default) in the file."""
    match = re.search(rf"^\s*{re.escape(key)}:(?: \[\])?\s*\n((?:\s*#.*\n)+)", SHIPPED_TEXT, re.MULTILINE)
    return match.group(1) if match else ""


def undocumented(model: type[BaseModel], section: Any, path: str, comment: str = "") -> Iterator[str]:
    """The dotted paths of `model`'s fields that `section` (the file's part for it) lacks."""
    for name, field in model.model_fields.items():
        where = f"{path}{name}"
        entries = section if isinstance(section, list) else [section]
        present = [entry[name] for entry in entries if isinstance(entry, dict) and name in entry]
        if not present:
            if not re.search(rf"\b{name}\b", comment):
                yield where
            continue
        inner = nested_model(field.annotation)
        if inner is None:
            continue
        inner_model, is_list = inner
        if is_list:
            items = [item for value in present for item in value]
            yield from undocumented(inner_model, items, f"{where}.", comment_under(name))
        else:
            yield from undocumented(inner_model, present[0], f"{where}.")


def test_every_setting_appears_in_config_yaml() -> None:
    assert list(undocumented(settings_model(), SHIPPED, "")) == []


def test_every_registered_lane_has_its_section() -> None:
    assert [spec.name for spec in lanes.lanes()] == ["web", "telegram", "discord"]
    for spec in lanes.lanes():
        assert list(undocumented(spec.settings_model(), SHIPPED["channels"][spec.name], "")) == [], spec.name
