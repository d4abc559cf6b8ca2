"""A child process a test starts, with its output in a log file the test can show when it fails."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path


class LoggedProcess:
    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def kill(self) -> None:
        """SIGKILL: no goodbye to anyone."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
