"""Progress of a training run, said at least every 30 s while Ray Train runs it, so that minutes of training are
never silent on the console.

The workers log to the run's MLflow store (rank 0, ``training.raytrain.WorkerSetup.log``); Ray keeps their output
off the driver's console. So the driver reads the counter (``step``, or ``epoch`` for the hush word) and ``loss``
back from the store on a daemon thread and says one line through the caller's ``say``: the Prefect task passes its
run logger, which writes to the console and to the Prefect run.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from data.tracking import client

EVERY_S = 30.0


@dataclass
class Progress:
    """What one poll saw: the counter's value and the latest loss, against the time the watch started."""

    name: str
    total: int
    unit: str = "step"
    started: float = field(default_factory=time.monotonic)
    first: tuple[float, float] | None = None  # (time, counter) of the first counter seen: the rate's origin

    def line(self, done: float | None, loss: float | None, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        elapsed = now - self.started
        if done is None:
            return f"{self.name}: starting ({elapsed:.0f} s; no {self.unit} logged yet)"
        if self.first is None:
            self.first = (now, done)
        parts = [f"{self.name}: {self.unit} {done:.0f}/{self.total} ({100 * done / max(self.total, 1):.0f} %)"]
        if loss is not None:
            parts.append(f"loss {loss:.4f}")
        t0, d0 = self.first
        if done > d0 and now > t0:
            rate = (done - d0) / (now - t0)
            parts.append(f"{rate:.2f} {self.unit}s/s, ETA {_duration((self.total - done) / rate)}")
        parts.append(f"elapsed {_duration(elapsed)}")
        return ", ".join(parts)


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _latest(client, run_id: str, key: str) -> float | None:
    history = client.get_metric_history(run_id, key)
    return max(history, key=lambda m: (m.step, m.timestamp)).value if history else None


@contextlib.contextmanager
def watch(tracking_uri: str, run_id: str, progress: Progress | None, say: Callable[[str], None] | None,
          every_s: float = EVERY_S) -> Iterator[None]:
    """Say ``progress``'s line every ``every_s`` seconds while the body runs (nothing without ``progress`` and
    ``say``). A store that does not answer is skipped for that poll: progress never fails a training run."""
    if progress is None or say is None:
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        c = client(tracking_uri)
        while not stop.wait(every_s):
            try:
                say(progress.line(_latest(c, run_id, progress.unit), _latest(c, run_id, "loss")))
            except Exception as err:  # the store is busy or gone: say so, try again next time
                say(f"{progress.name}: progress unavailable ({type(err).__name__})")

    thread = threading.Thread(target=loop, name=f"progress-{progress.name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


__all__ = ["EVERY_S", "Progress", "watch"]
