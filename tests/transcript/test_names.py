from __future__ import annotations

import re

from transcript import sanitise_name

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_allowed_names_are_unchanged() -> None:
    assert sanitise_name("alice_01-x") == "alice_01-x"


def test_runs_of_other_characters_become_one_underscore() -> None:
    assert sanitise_name("Alice Smith") == "Alice_Smith"
    assert sanitise_name("a!!b  ??c") == "a_b_c"
    assert sanitise_name("  @bob!  ") == "bob"


def test_accented_letters_are_dropped_but_the_rest_kept() -> None:
    assert sanitise_name("Zoë Ann") == "Zo_Ann"
    assert sanitise_name("张三 Zhang") == "Zhang"


def test_chinese_name_gets_a_stable_hash_fallback() -> None:
    name = sanitise_name("张三")
    assert re.fullmatch(r"name_[0-9a-f]{8}", name)
    assert name == "name_" + __import__("hashlib").sha256("张三".encode()).hexdigest()[:8]
    assert sanitise_name("李四") != name


def test_names_without_letters_or_digits_never_come_back_empty() -> None:
    for raw in ("", "___", "!!!", "🙂"):
        assert VALID.match(sanitise_name(raw)), raw
        assert sanitise_name(raw).startswith("name_")


def test_long_names_are_trimmed_to_64() -> None:
    name = sanitise_name("x" * 100)
    assert name == "x" * 64
    assert VALID.match(sanitise_name("ab " * 50))
