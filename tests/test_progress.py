"""Training progress said while Ray Train runs (``training.progress``, issue 65): read back from a real MLflow store."""

from __future__ import annotations

import time

from training.progress import Progress, watch
from data.tracking import log_metrics, open_run


def test_the_line_gives_step_loss_rate_and_eta():
    p = Progress("causal-300ms", 300, started=0.0)
    assert p.line(None, None, now=12.0) == "causal-300ms: starting (12 s; no step logged yet)"
    first = p.line(10, 2.5, now=30.0)
    assert first.startswith("causal-300ms: step 10/300 (3 %), loss 2.5000") and "ETA" not in first
    later = p.line(70, 1.25, now=90.0)  # 60 steps in 60 s: 1 step/s, 230 to go
    assert "step 70/300 (23 %)" in later and "1.00 steps/s" in later and "ETA 3m50s" in later
    assert "elapsed 1m30s" in later


def test_watch_reads_a_real_store_while_the_body_runs(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id, _ = open_run(uri, "progress-test", "key", "run", {}, {})
    said: list[str] = []
    with watch(uri, run_id, Progress("hush", 30, unit="epoch"), said.append, every_s=0.5):
        time.sleep(1.2)  # before any epoch: "starting"
        for epoch in range(3):
            log_metrics(uri, run_id, {"epoch": epoch, "loss": 1.0 / (epoch + 1)}, epoch)
            time.sleep(0.6)
    assert said and said[0].startswith("hush: starting")
    assert any(line.startswith("hush: epoch 2/30") and "loss 0.3333" in line for line in said), said
    count = len(said)
    time.sleep(1.0)
    assert len(said) == count  # the thread stopped with the body


def test_no_say_no_thread(tmp_path):
    with watch("sqlite:///nowhere.db", "run", Progress("x", 1), None):
        pass


def test_an_evaluation_says_its_progress_while_it_streams():
    """``evaluation.streamed.stream_all`` (what the evaluate stage runs per system): a line per interval with the
    utterances and audio done and an ETA, none after the last utterance, and the same records as without."""
    import numpy as np

    from evaluation.sets import Utterance
    from evaluation.streamed import stream_all
    from streaming.events import Hypothesis

    class Counting:  # a recognizer that writes one word per chunk it hears (streaming.events.StreamingRecognizer)
        def reset(self):
            self.n = 0

        def feed(self, samples):
            self.n += 1
            return Hypothesis((), ("w",) * self.n)

        def finish(self):
            return Hypothesis(("w",) * self.n)

    utts = [Utterance(f"u{i}", np.zeros(16_000, dtype=np.float32), "w", ()) for i in range(3)]
    said: list[str] = []
    records = stream_all(Counting(), utts, 300, say=said.append, name="counting", every_s=0.0)
    assert [r.text for r in records] == [r.text for r in stream_all(Counting(), utts, 300)]
    assert len(said) == 2 and said[0].startswith("counting: 1/3 utterances, 1/3 s of audio") and "ETA" in said[0]
