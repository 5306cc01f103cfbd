"""Helpers for benchmark scripts: machine info, result files, markdown tables."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def realspeech_path(arg: str | None = None) -> Path:
    root = Path(arg or os.environ.get("WHISPERLINE_REALSPEECH", "../shared/data/realspeech"))
    return root if root.is_absolute() else (Path(__file__).resolve().parent.parent / root).resolve()


def cpu_model() -> str:
    """The CPU's name (timings from different CPU models of one machine kind are not comparable)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent, check=False).stdout.strip()
    except OSError:
        commit = ""
    from streaming.precision import machine_info  # ISA flags, oneDNN cap, native bf16, torch and its threads

    return {**machine_info(), "cpus": os.cpu_count(), "cpu_model": cpu_model(), "platform": platform.platform(),
            "python": platform.python_version(), "git_commit": commit,
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def write_results(name: str, payload: dict, table: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({**payload, "machine": machine()}, indent=2, sort_keys=True) + "\n")
    (RESULTS / f"{name}.md").write_text(table + "\n")
    print(table)
    return path


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
