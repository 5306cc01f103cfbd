"""MLflow "models from code" definition of an EMMA streaming recognizer (a promoted sweep trial).

Artifacts: ``policy`` (the trained policy directory) and, for a policy on the causal LoRA encoder, ``adapter``;
the base weights are resolved locally and checked against the recorded sha256. ``model_config`` holds the
inference parameters of the trial (``t_emma``, ``max_stall``); ``params`` may override them per call.
``predict`` takes a DataFrame with an ``audio_path`` column and returns the streamed ``text`` per row.
"""

from __future__ import annotations

import mlflow
import pandas as pd
from mlflow.pyfunc import PythonModel

from configs.emma import EmmaConfig
from data.audio import load_audio
from streaming.engine import CausalStreamingEngine
from streaming.events import run_stream
from training.emma.artifact import load_policy
from training.emma.decoding import emma_decoder


class EmmaStreamingModel(PythonModel):
    def load_context(self, context) -> None:
        self.model, self.policy, meta = load_policy(context.artifacts["policy"], context.artifacts.get("adapter"))
        self.cfg = EmmaConfig.model_validate(meta["config"])
        self.defaults = {"t_emma": self.cfg.t_emma, "max_stall": self.cfg.max_stall, **(context.model_config or {})}

    @property
    def chunk_choices(self) -> tuple[int, ...]:
        return (self.cfg.chunk_ms,)  # the policy is trained at one chunk size

    def engine(self, chunk_ms: int | None = None, **params):
        """A new streaming engine with the policy's read/write decisions (``params``: ``t_emma``, ``max_stall``)."""
        if chunk_ms not in (None, self.cfg.chunk_ms):
            raise ValueError(f"this policy is trained at {self.cfg.chunk_ms} ms chunks, not {chunk_ms}")
        chosen = {**self.defaults, **{k: v for k, v in params.items() if v}}
        return CausalStreamingEngine(self.model, chunk_ms=self.cfg.chunk_ms, tau0_ms=self.cfg.resolved_tau0_ms,
                                     decoder=emma_decoder(self.policy, float(chosen["t_emma"]),
                                                          int(chosen["max_stall"]), self.cfg.decision))

    def predict(self, context, model_input: pd.DataFrame, params: dict | None = None) -> pd.DataFrame:
        if "audio_path" not in model_input:
            raise ValueError(f"expected a DataFrame with an 'audio_path' column, got columns {list(model_input)}")
        chosen = {**self.defaults, **{k: v for k, v in (params or {}).items() if v}}
        chunk_ms = self.cfg.chunk_ms
        engine = self.engine(None, **chosen)
        rows = []
        for path in model_input["audio_path"]:
            record = run_stream(engine, load_audio(str(path)).samples, chunk_ms)
            rows.append({"audio_path": str(path), "text": record.text, "t_emma": float(chosen["t_emma"])})
        return pd.DataFrame(rows)


mlflow.models.set_model(EmmaStreamingModel())
