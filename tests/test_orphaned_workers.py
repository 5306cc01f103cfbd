"""A pool worker whose build driver was killed stops at its next batch instead of aligning queued batches for nobody
(data.stages.stop_if_orphaned). Real processes: a driver with a spawn process pool, SIGKILLed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent

DRIVER = '''
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor


def batches(pidfile):  # stands for a worker running queued batches: each begins with the check
    from data.stages import stop_if_orphaned

    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(pidfile + ".tmp", pidfile)
    while True:
        stop_if_orphaned()
        time.sleep(0.05)


if __name__ == "__main__":
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(batches, sys.argv[1])
        time.sleep(600)
'''


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_pool_worker_stops_once_its_build_driver_is_killed(tmp_path: Path):
    script, pidfile = tmp_path / "driver.py", tmp_path / "worker.pid"
    script.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    driver = subprocess.Popen([sys.executable, str(script), str(pidfile)], env=env)
    worker = None
    try:
        deadline = time.monotonic() + 120
        while not pidfile.exists():
            assert driver.poll() is None, "the driver ended before its worker started"
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.1)
        worker = int(pidfile.read_text())
        time.sleep(0.5)
        assert _running(worker), "the worker stopped while its driver was alive"
        driver.kill()
        driver.wait()
        deadline = time.monotonic() + 20
        while _running(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(worker), "the worker kept running after its driver was killed"
    finally:
        driver.kill()
        if worker is not None and _running(worker):
            os.kill(worker, 9)
