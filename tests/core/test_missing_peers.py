"""Under CI=true a test skipped for a missing peer fails the run; other skips stay skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.peers import CHROMIUM, DENSE_MODEL, LOCOMO, POSTGRES

ROOT = Path(__file__).resolve().parents[2]

# The suite's own hooks, in a scratch folder outside the suite.
CONFTEST = "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n"
TESTS = """
import pytest

from tests.support.peers import CHROMIUM, DENSE_MODEL, LOCOMO, POSTGRES

@pytest.mark.parametrize("peer", [CHROMIUM, POSTGRES, DENSE_MODEL, LOCOMO], ids=lambda peer: peer.what[:12])
def test_needs(peer):
    peer.skip()

@POSTGRES.needed(False)
def test_marked():
    pass

def test_skipped_for_another_reason():
    pytest.skip("the reference implementation needs PyTorch")
"""
MODULE = """
from tests.support.peers import DENSE_MODEL

pytestmark = DENSE_MODEL.needed(False)

def test_in_a_module_that_needs_the_model():
    pass
"""


def run_scratch_suite(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_peers.py").write_text(TESTS)
    (tmp_path / "test_module.py").write_text(MODULE)
    environment = {k: v for k, v in os.environ.items() if k != "CI"}
    environment["PYTHONPATH"] = str(ROOT)
    if ci is not None:
        environment["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-rfEs", str(tmp_path)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
    )


def test_without_ci_a_missing_peer_is_a_skip_that_says_how_to_install_it(tmp_path: Path) -> None:
    result = run_scratch_suite(tmp_path, None)
    assert result.returncode == 0, result.stdout
    assert "7 skipped" in result.stdout
    assert CHROMIUM.reason in result.stdout


def test_under_ci_a_missing_peer_fails_and_another_skip_stays_a_skip(tmp_path: Path) -> None:
    result = run_scratch_suite(tmp_path, "true")
    assert result.returncode == 1, result.stdout
    # The four peers fail; so do the marked test and the marked module, at their setup (errors).
    # The PyTorch skip stays a skip.
    assert "4 failed, 1 skipped, 2 errors" in result.stdout
    for peer in (CHROMIUM, POSTGRES, DENSE_MODEL, LOCOMO):
        assert f"CI=true and this test cannot run: {peer.reason}" in result.stdout
