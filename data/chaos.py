"""Fault injection for the reliability drills: a process kills itself (SIGKILL, no clean-up, like an OOM kill or a
lost node) at a named point when ``WHISPERLINE_CHAOS_KILL_AT`` names that point. Unset, it costs one lookup."""

from __future__ import annotations

import os
import signal

ENV = "WHISPERLINE_CHAOS_KILL_AT"


def kill_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
