"""LocalAgreement-2: a re-implementation of the ufal/whisper_streaming policy on openai-whisper.

Algorithm (Macháček, Dabre, Bojar 2023; `whisper_online.py` of ufal/whisper_streaming, summarised in
../shared/research/hushword_baselines.md §5):

* The processor keeps an audio buffer that starts at ``offset`` seconds of the stream. Every update
  (``feed`` once at least ``min_chunk_ms`` of unprocessed audio has arrived) re-transcribes the WHOLE buffer
  with Whisper (30 s padded, as Whisper always does) and word timestamps, prompted with the last
  ``prompt_chars`` characters of the committed text that lies *before* the buffer (text scrolled out of it).
* The words, shifted to stream time, go into a hypothesis buffer (:class:`AgreementBuffer`): words that
  start before the last committed word's end (−0.1 s) are dropped; if the first new word starts within
  1 s of that end, a 1..5-word n-gram of the new words that repeats the tail of the committed words is
  removed (the re-transcribed context). Then the longest common word prefix of this hypothesis and the
  previous one is committed (LocalAgreement-2); the rest of the new hypothesis is the tentative tail and
  is what the next update is compared with.
* Buffer trimming (``buffer_trimming="segment"``, ufal's default, 15 s): when the buffer is longer than
  ``buffer_trimming_s``, cut it at the end of the second-to-last Whisper segment that ends inside the
  committed area (if none does, nothing is cut). ``"sentence"`` cuts at the end of the second-to-last
  committed sentence whenever new text was committed and the buffer is longer than ``buffer_trimming_s``,
  with the segment rule as a fallback beyond 30 s.
* ``finish`` runs one last update if unprocessed audio is left, then commits the tentative tail.

ASR call: ``whisper.transcribe(model, buffer, language="en", initial_prompt=prompt, word_timestamps=True,
condition_on_previous_text=False, temperature=0.0, fp16=False, beam_size=beam_size)``: openai-whisper's
own long-form loop, so the buffer is padded to 30 s per window and a buffer > 30 s is handled in several
windows (as faster-whisper does for the original). It is called on an :class:`EncodeOnceView` of the model,
so each window is encoded once (plain openai-whisper encodes it a second time for the word alignment;
faster-whisper does not); the result is identical. Segments with ``no_speech_prob > 0.9`` are skipped, as
ufal's faster-whisper backend does.

The prompt is, as in the original, only committed text that has already scrolled out of the audio buffer
(text still inside the buffer is re-transcribed, so prompting with it would duplicate it). Consequently
utterances shorter than ``buffer_trimming_s`` are never prompted.

Deviations from the original (ufal/whisper_streaming, faster-whisper backend, its defaults):

1. Backend: openai-whisper (`model.transcribe`) on the given model instead of faster-whisper/CTranslate2
   (fp16 on GPU / int8 on CPU there); fp32 here. Word timestamps therefore come from openai-whisper's
   cross-attention DTW, which is also what faster-whisper ports.
2. ``condition_on_previous_text=False`` and a single temperature (0, no fallback); the original passes
   ``condition_on_previous_text=True`` and faster-whisper's default fallback temperatures. Within one
   window (buffer ≤ 30 s) conditioning has no effect; the fallback is off for determinism.
3. ``min_chunk_ms`` (ufal ``--min-chunk-size``, 1.0 s) defaults to 0: every ``feed`` is an update, so the
   chunk size of :func:`~training.streaming.events.run_stream` plays the role of the minimum chunk (what
   ufal's computation-unaware simulation does).
4. Trimming cuts the audio at the exact sample (the original's old ``chunk_at`` truncated the cut to whole
   seconds, ``int(cut_seconds) * SR``); the ``"sentence"`` splitter is a punctuation rule (word ending in
   ``.``, ``?`` or ``!``) instead of the Moses/WtP sentence splitter.
5. ufal's computation-unaware simulation never feeds the last partial chunk (its loop stops when the next
   chunk end passes the file end); here every sample is fed and a leftover is transcribed at ``finish``.
6. No VAD/VAC (the original's defaults are off too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from training.streaming.baselines.offline import decoding_language
from training.streaming.events import SAMPLE_RATE, Hypothesis

if TYPE_CHECKING:
    from whisper.model import Whisper

__all__ = ["AgreementBuffer", "EncodeOnceView", "LocalAgreement2", "TimedWord"]


@dataclass(frozen=True, slots=True)
class TimedWord:
    start: float  # seconds of stream time
    end: float
    text: str  # as Whisper wrote it, with its leading space and attached punctuation

    @property
    def word(self) -> str:
        return self.text.strip()


class AgreementBuffer:
    """The hypothesis buffer of LocalAgreement-2 (ufal's ``HypothesisBuffer``), in stream time."""

    def __init__(self) -> None:
        self.committed_in_buffer: list[TimedWord] = []  # committed words whose audio may still be buffered
        self.previous: list[TimedWord] = []  # the unconfirmed tail of the previous hypothesis
        self.incoming: list[TimedWord] = []  # the latest hypothesis, after filtering
        self.last_committed_time = 0.0

    def insert(self, words: list[TimedWord]) -> None:
        """Take a new hypothesis (stream-time words); keep only what extends the committed text."""
        self.incoming = [w for w in words if w.start > self.last_committed_time - 0.1]
        if not self.incoming or not self.committed_in_buffer:
            return
        if abs(self.incoming[0].start - self.last_committed_time) >= 1.0:
            return
        # Drop the shortest 1..5-gram that repeats the committed tail (ufal tries n = 1, 2, ... in order).
        limit = min(len(self.committed_in_buffer), len(self.incoming), 5)
        for n in range(1, limit + 1):
            tail = [w.word for w in self.committed_in_buffer[-n:]]
            head = [w.word for w in self.incoming[:n]]
            if tail == head:
                del self.incoming[:n]
                break

    def flush(self) -> list[TimedWord]:
        """Commit the longest common prefix of the previous and the latest hypothesis; return it."""
        agreed: list[TimedWord] = []
        while self.incoming and self.previous and self.incoming[0].text == self.previous[0].text:
            word = self.incoming.pop(0)
            self.previous.pop(0)
            agreed.append(word)
            self.last_committed_time = word.end
        self.previous = self.incoming
        self.incoming = []
        self.committed_in_buffer.extend(agreed)
        return agreed

    def pop_committed(self, time: float) -> None:
        """Forget committed words that end by ``time`` (their audio left the buffer)."""
        while self.committed_in_buffer and self.committed_in_buffer[0].end <= time:
            self.committed_in_buffer.pop(0)

    def complete(self) -> list[TimedWord]:
        """The tentative tail (the latest hypothesis after the agreed prefix)."""
        return list(self.previous)


_SENTENCE_END = (".", "?", "!")


class EncodeOnceView:
    """A read-only view of a Whisper model for ``whisper.transcribe`` that runs the encoder once per window.

    openai-whisper's ``transcribe`` encodes each 30 s window twice when word timestamps are on: once in
    ``model.decode`` and again in ``timing.find_alignment`` (``model(mel, tokens)``). faster-whisper, the
    original's backend, reuses the encoder output for the alignment. This view remembers the last
    (mel → features) pair, so the second call is free; everything else is delegated to the real model
    (whose modules, weights and hooks are used as they are; nothing is modified).
    """

    def __init__(self, model: Whisper, hush_word: Any = None) -> None:
        self._model = model
        self._mel: Any = None
        self._features: Any = None
        self.encoder_calls = 0
        # Hush word: the first window of a transcription (seek 0, the whole buffer when it is shorter than 30 s)
        # is encoded as buffer ⊕ hush word at its real length instead of the 30 s-padded mel whisper passes.
        self.hush_word = hush_word
        self.buffer: Any = None
        self.hush_encodes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def encoder(self, mel: Any) -> Any:
        import torch

        if self._mel is not None and self._mel.shape == mel.shape and torch.equal(self._mel, mel):
            return self._features
        self.encoder_calls += 1
        if self.hush_word is not None and self.buffer is not None and self._mel is None:
            from training.hush_word.frontend import encode, hushed_mel

            x = torch.from_numpy(self.buffer)
            self.hush_encodes += 1
            self._features = encode(self._model, hushed_mel(x, torch.from_numpy(self.hush_word),
                                                            self._model.dims.n_mels)[None].to(mel.device))
        else:
            self._features = self._model.encoder(mel)
        self._mel = mel.detach().clone()
        return self._features

    embed_audio = encoder

    def __call__(self, mel: Any, tokens: Any) -> Any:
        return self._model.decoder(tokens, self.encoder(mel))

    def logits(self, tokens: Any, audio_features: Any) -> Any:
        return self._model.decoder(tokens, audio_features)

    def decode(self, mel: Any, options: Any = None, **kwargs: Any) -> Any:
        from whisper.decoding import DecodingOptions, decode

        return decode(self, mel, options if options is not None else DecodingOptions(), **kwargs)

    def detect_language(self, mel: Any, tokenizer: Any = None) -> Any:
        from whisper.decoding import detect_language

        return detect_language(self, mel, tokenizer)

    def forget(self) -> None:
        self._mel = self._features = self.buffer = None


class LocalAgreement2:
    """ufal whisper_streaming (LocalAgreement-2) on an openai-whisper model. Implements `StreamingRecognizer`.

    ``model``: a loaded openai-whisper model (shared; never modified). ``min_chunk_ms``: minimum unprocessed
    audio before an update (0: every feed). ``buffer_trimming_s`` / ``buffer_trimming``: see the module doc.
    ``beam_size``: beam of every transcription (None or 1 = greedy). ``prompt_chars``: prompt length.
    ``no_speech_skip``: segments with a higher no-speech probability contribute no words. ``hush_word``: encode the
    buffer ⊕ this learned segment at its real length instead of Whisper's 30 s padding.
    """

    def __init__(
        self,
        model: Whisper,
        min_chunk_ms: float = 0.0,
        buffer_trimming_s: float = 15.0,
        beam_size: int | None = 5,
        prompt_chars: int = 200,
        *,
        buffer_trimming: Literal["segment", "sentence"] = "segment",
        no_speech_skip: float = 0.9,
        hush_word: np.ndarray | None = None,
    ) -> None:
        if buffer_trimming not in ("segment", "sentence"):
            raise ValueError(f"buffer_trimming must be 'segment' or 'sentence', got {buffer_trimming!r}")
        self.model = model
        self.min_chunk_ms = float(min_chunk_ms)
        self.buffer_trimming_s = float(buffer_trimming_s)
        self.buffer_trimming = buffer_trimming
        self.beam_size = beam_size if beam_size and beam_size > 1 else None
        self.prompt_chars = int(prompt_chars)
        self.no_speech_skip = float(no_speech_skip)
        self.language = decoding_language(model)
        hush = None if hush_word is None else np.asarray(hush_word, dtype=np.float32)
        if hush is not None and buffer_trimming_s + 2 + len(hush) / SAMPLE_RATE > 30:
            raise ValueError("with a hush word the buffer (buffer_trimming_s + a 2 s margin) must leave room for it")
        self._view = EncodeOnceView(model, hush)
        self.reset()

    # ------------------------------------------------------------------ StreamingRecognizer

    def reset(self) -> None:
        self._audio = np.zeros(0, np.float32)  # the buffer; starts at self._offset seconds of stream time
        self._offset = 0.0
        self._unprocessed = 0  # samples fed since the last update
        self._hyp = AgreementBuffer()
        self._committed: list[TimedWord] = []
        self.updates = 0  # number of transcriptions run (for inspection)
        self.last_prompt = ""

    def feed(self, samples: np.ndarray) -> Hypothesis:
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        self._audio = np.concatenate([self._audio, samples])
        self._unprocessed += len(samples)
        if self._unprocessed > 0 and self._unprocessed * 1000 / SAMPLE_RATE >= self.min_chunk_ms:
            self._update()
        return self._hypothesis()

    def finish(self) -> Hypothesis:
        if self._unprocessed > 0:
            self._update()
        self._committed.extend(self._hyp.complete())
        self._hyp.previous = []
        return Hypothesis(self._words(self._committed))

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _words(words: list[TimedWord]) -> tuple[str, ...]:
        return tuple(w.word for w in words if w.word)

    def _hypothesis(self) -> Hypothesis:
        return Hypothesis(self._words(self._committed), self._words(self._hyp.complete()))

    def _prompt(self) -> str:
        """The last ~``prompt_chars`` characters of committed words that ended before the buffer start."""
        k = len(self._committed)
        while k > 0 and self._committed[k - 1].end > self._offset:
            k -= 1
        picked: list[str] = []
        length = 0
        for word in reversed(self._committed[:k]):
            if length >= self.prompt_chars:
                break
            picked.append(word.text)
            length += len(word.text) + 1
        return "".join(reversed(picked)).strip()

    def transcribe_buffer(self, audio: np.ndarray, prompt: str) -> dict[str, Any]:
        """One Whisper transcription of the buffer (openai-whisper's ``transcribe``), word timestamps on."""
        from whisper.transcribe import transcribe

        # the hush word applies to a buffer that fits Whisper's window together with it
        fits = len(audio) + (0 if self._view.hush_word is None else len(self._view.hush_word)) <= 30 * SAMPLE_RATE
        self._view.buffer = np.ascontiguousarray(audio, dtype=np.float32) if fits else None
        try:
            return transcribe(
                self._view,
                audio,
                language=self.language,
                initial_prompt=prompt or None,
                word_timestamps=True,
                condition_on_previous_text=False,
                temperature=0.0,
                fp16=False,
                beam_size=self.beam_size,
                verbose=None,
            )
        finally:
            self._view.forget()

    def _update(self) -> None:
        self._unprocessed = 0
        if len(self._audio) == 0:
            return
        prompt = self._prompt()
        self.last_prompt = prompt
        result = self.transcribe_buffer(self._audio, prompt)
        self.updates += 1
        segments = result.get("segments", [])
        words = [
            TimedWord(float(w["start"]) + self._offset, float(w["end"]) + self._offset, w["word"])
            for seg in segments
            if seg.get("no_speech_prob", 0.0) <= self.no_speech_skip
            for w in seg.get("words", [])
        ]
        self._hyp.insert(words)
        agreed = self._hyp.flush()
        self._committed.extend(agreed)

        buffer_s = len(self._audio) / SAMPLE_RATE
        if agreed and self.buffer_trimming == "sentence" and buffer_s > self.buffer_trimming_s:
            self._trim_at_sentence()
        limit = self.buffer_trimming_s if self.buffer_trimming == "segment" else 30.0
        if len(self._audio) / SAMPLE_RATE > limit:
            self._trim_at_segment([float(seg["end"]) for seg in segments])

    def _trim_at_segment(self, ends: list[float]) -> None:
        """Cut at the end of the second-to-last segment that lies in the committed area (ufal's rule)."""
        if not self._committed or len(ends) < 2:
            return
        last_committed_end = self._committed[-1].end
        ends = list(ends)
        cut = ends[-2] + self._offset
        while len(ends) > 2 and cut > last_committed_end:
            ends.pop()
            cut = ends[-2] + self._offset
        if cut <= last_committed_end:
            self._chunk_at(cut)

    def _trim_at_sentence(self) -> None:
        """Cut at the end of the second-to-last committed sentence (punctuation-delimited)."""
        # Sentence ends; an unfinished last sentence counts as a sentence too (as a sentence splitter would).
        ends = [w.end for w in self._committed if w.word.endswith(_SENTENCE_END)]
        if self._committed and not self._committed[-1].word.endswith(_SENTENCE_END):
            ends.append(self._committed[-1].end)
        if len(ends) >= 2:
            self._chunk_at(ends[-2])

    def _chunk_at(self, time: float) -> None:
        if time <= self._offset:
            return
        self._hyp.pop_committed(time)
        cut = int(round((time - self._offset) * SAMPLE_RATE))
        self._audio = self._audio[cut:]
        self._offset += cut / SAMPLE_RATE
