"""Fault injection for the reliability drills: a process kills itself (SIGKILL, no clean-up, like an OOM kill or a
lost node) at a named point when ``WHISPERLINE_CHAOS_KILL_AT`` names that point. Unset, it costs one lookup.

``step(name)`` marks a point where another process could interleave (publishing): a test installs ``STEP_HOOK`` to
pause there and let a second builder run, step by step."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

ENV = "WHISPERLINE_CHAOS_KILL_AT"
STEP_HOOK: Callable[[str], None] | None = None


def step(name: str) -> None:
    kill_point(name)
    if STEP_HOOK is not None:
        STEP_HOOK(name)


def kill_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
