"""Offline Whisper as a (degenerate) streaming recognizer: the accuracy ceiling every streaming system is
compared with.

`feed` only buffers audio and shows nothing; `finish` transcribes the whole buffer in one
`whisper.decode` call and commits every word. Decoding: temperature 0, greedy (``beam_size=None``) or beam
search, no timestamps, fp32, ``language="en"`` (:func:`decoding_language`), whisper's default token suppression.

The audio → mel step is a hook (``padding``): ``"pad30"`` (the default) is Whisper's own front end: log-mel of
the audio plus 30 s of zeros, cut to exactly 3000 frames, as `whisper.transcribe` feeds a clip shorter than 30 s.
Any callable ``audio (float32, 16 kHz) → mel tensor (n_mels, T)`` can be given instead, e.g. the hush-word front
end (:func:`hush_word_mel`: T < 3000, run on a variable-length view of the encoder); register it in
:data:`PADDINGS` to select it by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
import whisper

from streaming.events import Hypothesis
from streaming.hush.frontend import variable_length_view
from streaming.hush.transcribe import condition_mel

if TYPE_CHECKING:
    from whisper.model import Whisper

__all__ = ["PADDINGS", "MelFunction", "OfflineWhisper", "decoding_language", "hush_word_mel", "pad30_mel"]

MelFunction = Callable[[np.ndarray], torch.Tensor]  # audio (float32, 16 kHz, mono) -> mel (n_mels, frames)


def pad30_mel(model: Whisper) -> MelFunction:
    """Whisper's standard front end for ``model``: log-mel with 30 s of zero padding, trimmed to 3000 frames."""
    def mel(audio: np.ndarray) -> torch.Tensor:
        samples = torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32))
        spec = whisper.log_mel_spectrogram(samples, model.dims.n_mels, padding=whisper.audio.N_SAMPLES)
        return whisper.pad_or_trim(spec, whisper.audio.N_FRAMES).to(model.device)

    return mel


def hush_word_mel(model: Whisper, hush: np.ndarray) -> MelFunction:
    """The hush-word front end (``padding=hush_word_mel(model, hush)``): speech ⊕ the learned segment at its real
    length, no 30 s padding."""
    return lambda audio: condition_mel(model, audio, "hush", hush).to(model.device)


# name -> factory(model) -> MelFunction
PADDINGS: dict[str, Callable[[Whisper], MelFunction]] = {"pad30": pad30_mel}


def decoding_language(model: Whisper) -> str:
    """The language option for ``model``: always ``"en"``.

    A multilingual checkpoint gets ``<|en|>`` in its SOT sequence. An English-only (``.en``) tokenizer has no
    language token and ignores the option, but ``whisper.decode`` must still be given ``"en"``: with
    ``language=None`` it runs language detection, which raises on a model without language tokens.
    """
    return "en"


class OfflineWhisper:
    """Buffers the stream and decodes it once at the end. Implements `StreamingRecognizer`.

    ``model``: a loaded openai-whisper model (shared; never modified). ``beam_size``: None = greedy.
    ``padding``: a name in :data:`PADDINGS` or a callable ``audio -> mel``.
    """

    def __init__(self, model: Whisper, beam_size: int | None = None, padding: str | MelFunction = "pad30") -> None:
        self.model = model
        self.beam_size = beam_size
        # audio past 30 s is transcribed by openai-whisper's own long-form algorithm (timestamped 30 s windows)
        self.long_form = padding == "pad30"
        if callable(padding):
            self.mel: MelFunction = padding
        elif padding in PADDINGS:
            self.mel = PADDINGS[padding](model)
        else:
            raise ValueError(f"unknown padding {padding!r}; known: {sorted(PADDINGS)} or a callable audio -> mel")
        self.options = whisper.DecodingOptions(
            task="transcribe",
            language=decoding_language(model),
            temperature=0.0,
            beam_size=beam_size,
            without_timestamps=True,
            fp16=False,
        )
        self._pieces: list[np.ndarray] = []

    # ------------------------------------------------------------------ StreamingRecognizer

    def reset(self) -> None:
        self._pieces = []

    def feed(self, samples: np.ndarray) -> Hypothesis:
        self._pieces.append(np.asarray(samples, dtype=np.float32).reshape(-1))
        return Hypothesis(())

    def finish(self) -> Hypothesis:
        audio = np.concatenate(self._pieces) if self._pieces else np.zeros(0, np.float32)
        return Hypothesis(tuple(self.transcribe(audio).split()))

    # ------------------------------------------------------------------ offline use

    def transcribe(self, audio: np.ndarray) -> str:
        """Text of one whole utterance (stripped); empty audio gives ""."""
        if len(audio) == 0:
            return ""
        if self.long_form and len(audio) > whisper.audio.N_SAMPLES:
            with torch.no_grad():
                result = whisper.transcribe(self.model, audio, language=self.options.language, temperature=0.0,
                                            beam_size=self.beam_size, condition_on_previous_text=False, fp16=False,
                                            verbose=None)
            return " ".join(result["text"].split())
        mel = self.mel(audio)
        model = self.model
        if mel.shape[-1] != whisper.audio.N_FRAMES:  # a real-length front end (hush word): variable-length encoder
            model = self._view = getattr(self, "_view", None) or variable_length_view(self.model)
        with torch.no_grad():
            result = whisper.decode(model, mel, self.options)
        return result.text.strip()
