"""``whisperline serve-model`` as a real process for the tests: started in its own process group with its own Ray
temp dir (so it never joins another test's Ray), stopped by signal, and what it left behind found."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from conftest import free_port, wait_http


def start_server(registry: dict, log: Path, env: dict[str, str] | None = None, timeout: float = 300,
                 args: tuple[str, ...] = ()):
    """``whisperline serve-model`` as its own process (and process group: its Ray runs there, in its own temp dir,
    so it never joins another test's Ray); (url, process, ray temp dir) once ``/version`` answers."""
    ray_tmp = tempfile.mkdtemp(prefix="rays-")  # short: Ray's unix sockets live there
    port = free_port()
    full_env = {**os.environ, "RAY_TMPDIR": ray_tmp, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1",
                **(env or {})}
    for var in ("RAY_ADDRESS", "WHISPERLINE_SERVE_TOKEN"):
        full_env.pop(var, None)
    cli = str(Path(sys.executable).parent / "whisperline")
    proc = subprocess.Popen([cli, "serve-model", "--model", registry["registered_model"], "--alias",
                             registry["alias"], "--port", str(port), "--tracking-uri", registry["uri"],
                             "--poll-s", "30", *args],
                            env=full_env, stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/version", proc, log, "serve-model", timeout=timeout)
    except BaseException:
        stop_server(proc, ray_tmp)
        raise
    return url, proc, ray_tmp


def stop_server(proc: subprocess.Popen, ray_tmp: str) -> None:
    """Ctrl-C (the CLI shuts Serve down and its Ray with it), SIGTERM if that hangs; then whatever of its Ray is
    left in its process group or names its temp dir is killed (never `ray stop`: every Ray on the machine)."""
    for sig, wait_s in ((signal.SIGINT, 60), (signal.SIGTERM, 20)):
        if proc.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = subprocess.run(["pgrep", "-f", ray_tmp], capture_output=True, text=True).stdout.split()
    for pid in left:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    shutil.rmtree(ray_tmp, ignore_errors=True)


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def leftovers(proc: subprocess.Popen, ray_tmp: str) -> list[str]:
    """Live processes the server started: in its session (it is the session leader) or naming its Ray temp dir."""
    import psutil

    left = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE or p.pid == os.getpid():
                continue
            if os.getsid(p.pid) == proc.pid or ray_tmp in " ".join(p.info["cmdline"] or ()):
                left.append(f"{p.pid} {' '.join(p.info['cmdline'] or ())[:120]}")
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return left


def signal_stop(proc: subprocess.Popen, ray_tmp: str, sig: int, wait_s: float = 10.0) -> dict:
    """``sig`` sent; how long the server took to exit (None: not within ``wait_s``) and what it left running."""
    started = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(timeout=wait_s)
        took = time.monotonic() - started
    except subprocess.TimeoutExpired:
        took = None
    time.sleep(1.0)  # a process that outlived its parent by an instant is still one left behind
    return {"seconds": took, "returncode": proc.poll(), "left": leftovers(proc, ray_tmp)}
