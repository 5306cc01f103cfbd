"""MLflow "models from code" definition of a registered recognizer (``recognizer.registry.register_recognizer``).

``model_config["spec"]`` is the portable spec; ``context.artifacts`` hold its files. Loading builds the recognizer
once through ``recognizer.build.build`` (the base weights are checked against their sha256 by the
loaders), and ``engine(chunk_ms)`` builds one more per stream on the same weights: the evaluate stage, the server
and this model all run the spec the same way.

``predict`` takes a DataFrame with an ``audio_path`` column and returns the streamed ``text`` per file, the audio
fed in the recognizer's own chunks (any length: the recognizer is segmented).
"""

from __future__ import annotations

import mlflow
import pandas as pd
from mlflow.pyfunc import PythonModel

from data.audio import load_audio
from recognizer.artifact import from_portable, with_chunk
from recognizer.build import Models, build
from streaming.events import run_stream
from training.lora import read_adapter_meta


class RecognizerModel(PythonModel):
    def load_context(self, context) -> None:
        artifacts = {k: v for k, v in context.artifacts.items() if k != "spec"}
        self.spec = from_portable((context.model_config or {})["spec"], artifacts)
        self.models = Models()
        build(self.spec, self.models)  # loads (and checks) every weight now, not on the first stream
        self.meta = {"chunk_ms": int(self.spec.chunk_ms or 300), "kind": self.spec.kind}
        self.chunk_choices = self._chunk_choices()

    def _chunk_choices(self) -> tuple[int, ...]:
        """The chunk sizes the recognizer's adapter was trained for (a random-chunk adapter: several)."""
        if self.spec.weights.adapter_dir:
            choices = read_adapter_meta(self.spec.weights.adapter_dir).get("chunk_ms_choices") or ()
            if choices and self.spec.kind == "causal" and not self.spec.decoding.emma_dir:
                return tuple(int(c) for c in choices)
        return (self.meta["chunk_ms"],)

    def engine(self, chunk_ms: int | None = None):
        """A new recognizer for one stream (shared weights, own state)."""
        if chunk_ms is not None and int(chunk_ms) not in self.chunk_choices:
            raise ValueError(f"chunk_ms {chunk_ms} is not one this recognizer was built for {self.chunk_choices}")
        return build(with_chunk(self.spec, chunk_ms), self.models)[0]

    def predict(self, context, model_input: pd.DataFrame, params: dict | None = None) -> pd.DataFrame:
        if "audio_path" not in model_input:
            raise ValueError(f"expected a DataFrame with an 'audio_path' column, got columns {list(model_input)}")
        chunk_ms = int((params or {}).get("chunk_ms") or self.meta["chunk_ms"])
        rows = []
        for path in model_input["audio_path"]:
            # streams of any length: the recognizer is segmented (a 4 h bound only guards memory)
            samples = load_audio(str(path), max_duration_s=4 * 3600).samples
            record = run_stream(self.engine(chunk_ms), samples, chunk_ms)
            rows.append({"audio_path": str(path), "text": record.text, "chunk_ms": chunk_ms})
        return pd.DataFrame(rows)


mlflow.models.set_model(RecognizerModel())
