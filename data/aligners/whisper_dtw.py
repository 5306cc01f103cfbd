"""Whisper-DTW aligner: dynamic time warping over the cross-attention of Whisper's alignment heads,
forced on the reference transcript (openai-whisper's word-timestamp method, without its decoding).

The transcript is teacher-forced after ``<|startoftranscript|>…<|notimestamps|>``; the alignment
heads' attention (normalised, median-filtered) is warped against the 20 ms encoder frames, and a
word spans from its first token's jump to its last token's. openai-whisper's own splitting into
words can cut one of our words in two (a lone apostrophe or hyphen token), so tokens are mapped
back to our words by count: each of our words is the run of Whisper words covering its tokens.

Every clip pays a full 30 s encoder pass, as openai-whisper does: far slower than pocketsphinx on CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from importlib.metadata import version as package_version

import numpy as np

from data.aligners.base import Aligner
from data.tokens import get_tokenizer
from data.types import AlignmentError, WordSpan


class WhisperDtwAligner(Aligner):
    name = "whisper"

    def __init__(self, model: str = "tiny.en", medfilt_width: int = 7) -> None:
        from data.weights import checkpoint_sha256, load_model  # lazy: torch + whisper, only for this aligner

        self.model_name = model
        self.medfilt_width = int(medfilt_width)
        self.model = load_model(model, device="cpu").eval()
        self._sha = checkpoint_sha256(model)
        family = "multilingual" if self.model.is_multilingual else "english"
        self.tokenizer = get_tokenizer(family)

    @cached_property
    def version(self) -> str:
        return (f"whisper-dtw-{package_version('openai-whisper')}|{self.model_name}-{self._sha[:12]}"
                f"|medfilt{self.medfilt_width}")

    def align_spoken(self, audio: np.ndarray, words: Sequence[str],
                     groups: Sequence[int] | None = None) -> list[WordSpan]:
        import torch  # lazy: torch + whisper load only when this aligner runs
        from whisper.audio import HOP_LENGTH, N_FRAMES, N_SAMPLES, log_mel_spectrogram
        from whisper.timing import find_alignment

        if not words:
            raise AlignmentError("align_failed", "no words to align")
        if len(audio) > N_SAMPLES:
            raise AlignmentError("too_long", "whisper aligns at most 30 s at once")
        per_word = [self.tokenizer.encode(" " + w) for w in words]
        tokens = [t for ts in per_word for t in ts]
        if len(tokens) > self.model.dims.n_text_ctx // 2 - 4:
            raise AlignmentError("too_many_tokens", f"{len(tokens)} tokens do not fit Whisper's context")
        with torch.inference_mode():
            mel = log_mel_spectrogram(torch.from_numpy(np.ascontiguousarray(audio, dtype=np.float32)),
                                      self.model.dims.n_mels, padding=N_SAMPLES)[:, :N_FRAMES]
            timings = find_alignment(self.model, self.tokenizer, tokens, mel, len(audio) // HOP_LENGTH,
                                     medfilt_width=self.medfilt_width)
        duration_ms = int(round(len(audio) * 1000 / 16_000))
        spans: list[WordSpan] = []
        queue = list(timings)
        for word, word_tokens in zip(words, per_word, strict=True):
            need, start, end = len(word_tokens), None, None
            while need > 0 and queue:
                timing = queue.pop(0)
                start = timing.start if start is None else start
                end = timing.end
                need -= len(timing.tokens)
            if need != 0 or start is None or end is None:
                raise AlignmentError("word_count_mismatch", f"Whisper's word split does not cover {word!r}")
            start_ms = min(int(round(start * 1000)), duration_ms)
            spans.append(WordSpan(word, start_ms, max(start_ms, min(int(round(end * 1000)), duration_ms))))
        return spans
