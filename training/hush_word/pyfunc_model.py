"""MLflow "models from code": Whisper + a hush word, offline transcription without 30 s padding.

``predict`` takes a DataFrame with an ``audio_path`` column and returns the text per file. The base weights named
in the hush word's metadata are resolved locally and must match the recorded sha256.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pandas as pd
from mlflow.pyfunc import PythonModel

from data.audio import load_audio
from data.weights import checkpoint_sha256, load_model
from streaming.hush.frontend import load_hush_word
from streaming.hush.transcribe import HushWordTranscriber


class HushWordModel(PythonModel):
    def load_context(self, context) -> None:
        folder = Path(context.artifacts["hush_word"])
        meta = json.loads((folder / "hush_word.json").read_text())
        if checkpoint_sha256(meta["base_model"]) != meta["base_sha256"]:
            raise ValueError(f"local {meta['base_model']} weights differ from the ones the hush word was trained on")
        self.transcriber = HushWordTranscriber(load_model(meta["base_model"]).eval(), load_hush_word(folder))

    def predict(self, context, model_input: pd.DataFrame, params: dict | None = None) -> pd.DataFrame:
        if "audio_path" not in model_input:
            raise ValueError(f"expected a DataFrame with an 'audio_path' column, got columns {list(model_input)}")
        rows = [{"audio_path": str(p), "text": self.transcriber(load_audio(str(p)).samples)}
                for p in model_input["audio_path"]]
        return pd.DataFrame(rows)


mlflow.models.set_model(HushWordModel())
