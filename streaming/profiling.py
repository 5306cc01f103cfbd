"""Where a streaming step's time goes: per-component wall times of :class:`CausalStreamingEngine` steps.

``StepProfile.attach(engine)`` wraps the engine's own objects (instance attributes only; the classes and every
other engine are untouched) and times, per ``feed``:

- ``frontend``: the causal log-mel of the new samples;
- ``encoder``: the block-causal encoder on the new blocks (conv front + transformer with its K/V cache);
- ``cross_kv``: the decoder's cross-attention keys/values of the new frames (``append_audio``);
- ``recheck``: the first decoder pass of the step — the stability re-check of the last ``n_check`` tokens, which
  also yields the next token's logits (greedy); for beam search every decoder pass is counted here;
- ``new_tokens``: the decoder passes of the tokens written in the step (one per token, greedy);
- ``vocab``: the vocabulary projection inside those passes (counted inside ``recheck``/``new_tokens`` as well and
  reported on its own because it is the memory-bound part on CPU);
- ``python``: the rest of the step (sampling rules, word splitting, bookkeeping).

The wrappers add a ``perf_counter`` pair per call (well under a microsecond each), small against steps of
milliseconds; profiles are for finding where time goes, RTFs come from unwrapped engines.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

COMPONENTS = ("frontend", "encoder", "cross_kv", "recheck", "new_tokens", "vocab", "python")


@dataclass
class StepProfile:
    """Per-step component times in ms (``steps``: one dict per ``feed``, with its ``total``)."""

    steps: list[dict[str, float]] = field(default_factory=list)
    _current: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    _runs_in_step: int = 0

    def _timed(self, name: str, fn: Callable) -> Callable:
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._current[name] += (time.perf_counter() - t0) * 1e3
        return wrapper

    def attach(self, engine) -> StepProfile:
        """Wrap ``engine``'s front end, encoder and decoder calls (see the module docstring); returns ``self``."""
        engine.frontend.feed = self._timed("frontend", engine.frontend.feed)
        engine.encoder.stream = self._timed("encoder", engine.encoder.stream)
        decoder = engine.decoder
        text = decoder.decoder  # CachedTextDecoder
        text.append_audio = self._timed("cross_kv", text.append_audio)
        greedy = not hasattr(decoder, "beam_size")
        run = decoder._run

        def timed_run(*args, **kwargs):
            name = "new_tokens" if greedy and self._runs_in_step else "recheck"
            self._runs_in_step += 1
            return self._timed(name, run)(*args, **kwargs)

        decoder._run = timed_run
        projection = text._vocab_projection
        text._vocab_projection = lambda: self._timed("vocab", projection())
        feed = engine.feed

        def timed_feed(samples: np.ndarray):
            self._current, self._runs_in_step = defaultdict(float), 0
            t0 = time.perf_counter()
            out = feed(samples)
            total = (time.perf_counter() - t0) * 1e3
            step = {name: self._current.get(name, 0.0) for name in COMPONENTS if name != "python"}
            # vocab is inside the decoder passes: not subtracted twice
            step["python"] = max(0.0, total - sum(v for k, v in step.items() if k != "vocab"))
            step["total"] = total
            self.steps.append(step)
            return out

        engine.feed = timed_feed
        return self

    def summary(self, steps: Iterable[dict[str, float]] | None = None) -> dict[str, dict[str, float]]:
        """Median, mean and share of the total per component (plus ``total``), over the recorded steps."""
        rows = list(self.steps if steps is None else steps)
        if not rows:
            return {}
        total_sum = sum(r["total"] for r in rows) or 1.0
        out = {}
        for name in (*COMPONENTS, "total"):
            values = [r[name] for r in rows]
            out[name] = {"median_ms": round(statistics.median(values), 3), "mean_ms": round(statistics.fmean(values), 3),
                         "share": round(sum(values) / total_sum, 3)}
        return out


__all__ = ["COMPONENTS", "StepProfile"]
