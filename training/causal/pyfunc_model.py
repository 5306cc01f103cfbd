"""MLflow "models from code" definition of a fine-tuned causal streaming recognizer.

Logged by ``training.causal.run.log_streaming_model`` with the adapter directory as the ``adapter`` artifact. On
load, the base Whisper weights named in the adapter's metadata are resolved locally (whisperline's converted cache,
whisper's cache, or a download) and must have the recorded sha256; the adapter never embeds them.

``predict`` takes a DataFrame with an ``audio_path`` column (16 kHz mono wav/flac; other rates are resampled) and
returns one row per input with the streamed ``text`` and the chunk size used. ``params={"chunk_ms": …}`` chooses
another chunk size (meant for the random-chunk-size adapter).
"""

from __future__ import annotations

import mlflow
import pandas as pd
from mlflow.pyfunc import PythonModel

from data.audio import load_audio
from data.weights import checkpoint_sha256, load_model
from streaming.engine import CausalStreamingEngine
from streaming.events import run_stream
from training.lora import load_adapter, read_adapter_meta


class CausalStreamingModel(PythonModel):
    def load_context(self, context) -> None:
        adapter = context.artifacts["adapter"]
        self.meta = read_adapter_meta(adapter)
        base = self.meta["base_model"]
        self.model = load_model(base)
        load_adapter(self.model, adapter, base_sha256=checkpoint_sha256(base))
        self.model.eval()

    @property
    def chunk_choices(self) -> tuple[int, ...]:
        """The chunk sizes the adapter was trained for (a random-chunk adapter: several)."""
        return tuple(int(c) for c in self.meta.get("chunk_ms_choices") or ()) or (int(self.meta["chunk_ms"]),)

    def engine(self, chunk_ms: int | None = None):
        """A new streaming engine on this model (one per stream: the weights are shared, the state is not)."""
        chunk_ms = int(chunk_ms or self.meta["chunk_ms"])
        return CausalStreamingEngine(self.model, chunk_ms=chunk_ms, tau0_ms=max(int(self.meta["tau0_ms"]), chunk_ms))

    def predict(self, context, model_input: pd.DataFrame, params: dict | None = None) -> pd.DataFrame:
        chunk_ms = int((params or {}).get("chunk_ms") or self.meta["chunk_ms"])
        engine = self.engine(chunk_ms)
        if "audio_path" not in model_input:
            raise ValueError(f"expected a DataFrame with an 'audio_path' column, got columns {list(model_input)}")
        paths = model_input["audio_path"]
        rows = []
        for path in paths:
            record = run_stream(engine, load_audio(str(path)).samples, chunk_ms)
            rows.append({"audio_path": str(path), "text": record.text, "chunk_ms": chunk_ms})
        return pd.DataFrame(rows)


mlflow.models.set_model(CausalStreamingModel())
