"""AlignAtt: the Simul-Whisper / SimulStreaming policy, re-implemented on openai-whisper.

Algorithm (Papi et al.'s AlignAtt as applied to Whisper by Simul-Whisper, Wang et al. 2024, and by ufal's
SimulStreaming, Macháček & Polák 2025; summarised in ../shared/research/hushword_baselines.md §6):

Every update (``feed`` once at least ``min_chunk_ms`` of unprocessed audio arrived):

1. The whole audio buffer is encoded Whisper-style: log-mel + 30 s of zeros, cut to 3000 frames. Only the
   first ``content = samples // 320`` encoder frames hold real audio.
2. The decoder is given ``[<|startofprev|> context] <|startoftranscript|> [<|en|> <|transcribe|>]
   <|notimestamps|>`` followed by every token committed so far for the buffered audio (a forced prefix), in
   one forward pass; then new tokens are decoded greedily, one incremental step each (self-attention
   key/value cache, `Whisper.install_kv_cache_hooks`; the cross-attention keys/values are computed once
   per update). Suppressed: the task/SOT/language/no-speech/no-timestamps tokens and every timestamp
   token; at the first new token of an update also the blank and ``<|endoftext|>``.
3. For every new token, the cross-attention of the alignment heads (``model.alignment_heads``) at the
   position that predicted it is read from forward hooks on ``decoder.blocks[i].cross_attn`` (with SDPA
   off, whisper's `MultiHeadAttention` returns ``(out, qk)``): softmax over the 1500 frames, z-normalised
   per head and frame over all decoder positions of this update, median-filtered (width 7) along time,
   averaged over heads, cut to the real frames; its argmax is the most attended frame.
4. Stop rule: if ``content - frame <= frame_threshold`` (the token looks at the last 0.02·threshold s of
   audio, which may still be incomplete) the token is dropped and the update ends; ``<|endoftext|>`` also
   ends it. Rewind guard: if the most attended frame jumps back by more than ``rewind_threshold`` frames
   from the previous token's (unless the previous token is special), the attention is deemed to have failed
   and the update emits nothing.
5. The tokens before the stop are committed at once; AlignAtt never revises.

``finish`` runs a last update over all the audio that decodes to ``<|endoftext|>``: no frame rule (set
``final_frame_threshold`` to gate it anyway; SimulStreaming uses 4), no rewind guard.

Words: the committed tokens are decoded to text and split on whitespace. The last word is shown as
tentative until a later token starts a new word (a token with a leading space), because its remaining
tokens may still follow; at ``finish`` every word is committed.

Buffers longer than ``audio_max_s`` (30 s): like SimulStreaming's ``insert_audio``, the oldest update's audio
is dropped together with the tokens that update committed, which move into the context prompt after
``<|startofprev|>`` (at most ``max_context_tokens``, trimmed from the front, the whole decoder input kept
≤ ``n_text_ctx − 20``), and the remembered attention frame is shifted back.

Deviations from SimulStreaming (its CLI defaults: greedy, ``--frame_threshold 25``, ``--min-chunk-size
1.2``, ``--audio_max_len 30``, no CIF checkpoint):

1. Greedy decoding only (``beam_size`` None/1); SimulStreaming's optional beam search is not implemented.
2. No CIF end-of-word model; SimulStreaming without a CIF checkpoint keeps the last word too (its default).
3. ``finish`` decodes to ``<|endoftext|>`` without a frame rule and, if words were already committed,
   without suppressing ``<|endoftext|>`` at its first token (SimulStreaming's last update still applies a
   4-frame rule and the first-token suppression, which can force one extra token or drop the last one).
4. Timestamp tokens are suppressed (SimulStreaming relies on the ``<|notimestamps|>`` prefix alone).
5. The rewind guard's "special token" test is ``token >= tokenizer.eot`` (SimulStreaming compares with the
   multilingual ``<|endoftext|>`` id 50257, which in English-only vocabularies is ``<|startoftranscript|>``).
6. ``min_chunk_ms`` defaults to 0: every ``feed`` is an update, the chunk size of ``run_stream`` is the
   minimum chunk. No VAD/VAC, no no-speech stop (its default threshold 1.0 disables it), no static/initial
   prompt, no 240-sample overlap between segments (the buffer is contiguous audio here).
7. The z-normalisation statistics are computed over all positions of the update, as SimulStreaming does,
   but only the newest row is median-filtered (the filter runs along time, so the argmax is identical).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from training.streaming.baselines.offline import decoding_language
from training.streaming.events import SAMPLE_RATE, Hypothesis

if TYPE_CHECKING:
    from whisper.model import Whisper

__all__ = ["AlignAtt"]

SAMPLES_PER_ENCODER_FRAME = 320  # 160-sample mel hop, stride-2 conv: one encoder frame = 20 ms


class AlignAtt:
    """Simul-Whisper/SimulStreaming AlignAtt on an openai-whisper model. Implements `StreamingRecognizer`.

    ``model``: a loaded openai-whisper model (shared; its weights are never modified; hooks are removed
    after every update). ``frame_threshold``: encoder frames (20 ms each) from the end of the real audio
    within which a token's most attended frame stops the update. ``hush_word``: a learned segment appended to the
    buffer instead of padding it to 30 s (the encoder then runs on the real length). See the module doc for the rest.
    """

    def __init__(
        self,
        model: Whisper,
        frame_threshold: int = 25,
        beam_size: int | None = None,
        *,
        rewind_threshold: int = 200,
        min_chunk_ms: float = 0.0,
        audio_max_s: float = 30.0,
        final_frame_threshold: int | None = None,
        max_context_tokens: int | None = None,
        medfilt_width: int = 7,
        hush_word: np.ndarray | None = None,
    ) -> None:
        import whisper
        from whisper.tokenizer import get_tokenizer

        if beam_size not in (None, 1):
            raise NotImplementedError("AlignAtt here decodes greedily only (beam_size None or 1)")
        if not 0 < audio_max_s <= whisper.audio.CHUNK_LENGTH:
            raise ValueError(f"audio_max_s must be in (0, {whisper.audio.CHUNK_LENGTH}], got {audio_max_s}")
        self.hush_word = None if hush_word is None else np.asarray(hush_word, dtype=np.float32)
        if self.hush_word is not None and audio_max_s + len(self.hush_word) / SAMPLE_RATE > whisper.audio.CHUNK_LENGTH:
            raise ValueError(f"audio_max_s + the hush word must fit in {whisper.audio.CHUNK_LENGTH} s; "
                             f"lower audio_max_s to {whisper.audio.CHUNK_LENGTH - len(self.hush_word) / SAMPLE_RATE}")
        self.model = model
        self.frame_threshold = int(frame_threshold)
        self.final_frame_threshold = final_frame_threshold
        self.rewind_threshold = int(rewind_threshold)
        self.min_chunk_ms = float(min_chunk_ms)
        self.audio_max_s = float(audio_max_s)
        self.medfilt_width = int(medfilt_width)
        self.n_text_ctx = model.dims.n_text_ctx
        self.max_context_tokens = self.n_text_ctx if max_context_tokens is None else int(max_context_tokens)

        tok = get_tokenizer(
            model.is_multilingual,
            num_languages=model.num_languages,
            language=decoding_language(model),
            task="transcribe",
        )
        self.tokenizer = tok
        self.eot = tok.eot
        self.sot_prefix = list(tok.sot_sequence_including_notimestamps)
        suppress = {tok.transcribe, tok.translate, tok.sot, tok.sot_prev, tok.sot_lm, tok.no_timestamps,
                    *tok.all_language_tokens}
        if tok.no_speech is not None:
            suppress.add(tok.no_speech)
        suppress.update(range(tok.timestamp_begin, model.dims.n_vocab))
        self._suppress = torch.tensor(sorted(t for t in suppress if t < model.dims.n_vocab), dtype=torch.long)
        self._suppress_first = torch.tensor(sorted({*tok.encode(" "), tok.eot}), dtype=torch.long)
        self._suppress_blank = torch.tensor(tok.encode(" "), dtype=torch.long)

        heads: dict[int, list[int]] = {}
        for layer, head in model.alignment_heads.indices().T.tolist():
            heads.setdefault(int(layer), []).append(int(head))
        if not heads:
            raise ValueError("the model has no alignment heads")
        self._align_heads = heads
        self.reset()

    # ------------------------------------------------------------------ StreamingRecognizer

    def reset(self) -> None:
        self._pending: list[np.ndarray] = []  # fed, not yet given to an update
        self._pending_samples = 0
        self._segments: list[np.ndarray] = []  # buffered audio, one piece per update
        self._step_tokens: list[list[int]] = []  # tokens committed by each update (aligned with _segments)
        self._context: list[int] = []  # tokens whose audio left the buffer (prompt after <|startofprev|>)
        self._emitted: list[int] = []  # every committed token of the stream, in order
        self._last_attend = -self.rewind_threshold
        self.updates = 0
        self.trimmed_s = 0.0  # audio dropped from the front of the buffer so far
        self.last_stop: str = ""  # why the last update stopped: eot / frame / rewind / length

    def feed(self, samples: np.ndarray) -> Hypothesis:
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        if len(samples):
            self._pending.append(samples)
            self._pending_samples += len(samples)
        if self._pending_samples > 0 and self._pending_samples * 1000 / SAMPLE_RATE >= self.min_chunk_ms:
            self._update(is_last=False)
        return self._hypothesis(final=False)

    def finish(self) -> Hypothesis:
        if self._pending_samples > 0 or self._segments:
            self._update(is_last=True)
        return self._hypothesis(final=True)

    # ------------------------------------------------------------------ output

    @property
    def committed_tokens(self) -> list[int]:
        return list(self._emitted)

    def _hypothesis(self, final: bool) -> Hypothesis:
        words = self.tokenizer.decode(self._emitted).split()
        if final or not words:
            return Hypothesis(tuple(words))
        return Hypothesis(tuple(words[:-1]), (words[-1],))

    # ------------------------------------------------------------------ buffer

    def _take_pending(self, is_last: bool) -> None:
        if self._pending_samples:
            self._segments.append(np.concatenate(self._pending))
            self._step_tokens.append([])
            self._pending, self._pending_samples = [], 0
        elif is_last and not self._step_tokens:
            self._step_tokens.append([])
        max_samples = int(self.audio_max_s * SAMPLE_RATE)
        total = sum(len(s) for s in self._segments)
        while total > max_samples and len(self._segments) > 1:  # drop the oldest update's audio + tokens
            removed = len(self._segments.pop(0))
            total -= removed
            self._context.extend(self._step_tokens.pop(0))
            self._drop(removed)
        if total > max_samples:  # a single update longer than the limit: keep its newest audio_max_s
            extra = total - max_samples
            self._segments[0] = self._segments[0][extra:]
            self._drop(extra)

    def _drop(self, samples: int) -> None:
        self.trimmed_s += samples / SAMPLE_RATE
        self._last_attend -= samples // SAMPLES_PER_ENCODER_FRAME

    def _prefix(self) -> list[int]:
        forced = [t for step in self._step_tokens for t in step]
        budget = min(self.max_context_tokens, self.n_text_ctx - 20 - len(self.sot_prefix) - len(forced) - 1)
        context = self._context[-budget:] if budget > 0 else []
        while context and not self.tokenizer.decode([context[0]]).startswith(" ") and len(context) > 1:
            context = context[1:]  # start the prompt on a word boundary
        head = [self.tokenizer.sot_prev, *context] if context else []
        return head + self.sot_prefix + forced

    # ------------------------------------------------------------------ one update

    def _update(self, is_last: bool) -> None:
        import whisper
        from whisper.model import disable_sdpa

        self._take_pending(is_last)
        audio = np.concatenate(self._segments) if self._segments else np.zeros(0, np.float32)
        if len(audio) == 0:
            return
        self.updates += 1
        model = self.model
        samples = torch.from_numpy(np.ascontiguousarray(audio))
        content = min(len(audio) // SAMPLES_PER_ENCODER_FRAME, model.dims.n_audio_ctx)
        if self.hush_word is None:
            mel = whisper.log_mel_spectrogram(samples, model.dims.n_mels, padding=whisper.audio.N_SAMPLES)
            mel = whisper.pad_or_trim(mel, whisper.audio.N_FRAMES).to(model.device)
        else:  # buffer ⊕ hush word at its real length instead of 30 s of padding
            from training.hush_word.frontend import hushed_mel

            mel = hushed_mel(samples, torch.from_numpy(self.hush_word), model.dims.n_mels).to(model.device)

        prefix = self._prefix()
        rows: list[torch.Tensor] = []  # per forward: (n_align_heads, positions, 1500) attention weights
        current: dict[int, torch.Tensor] = {}

        def grab(layer: int):
            def hook(_module, _inputs, outputs):
                qk = outputs[1]
                if qk is not None:
                    current[layer] = qk[0, self._align_heads[layer]].float().softmax(dim=-1)

            return hook

        cache, hooks = model.install_kv_cache_hooks()
        hooks += [model.decoder.blocks[layer].cross_attn.register_forward_hook(grab(layer))
                  for layer in self._align_heads]
        new: list[int] = []
        self.last_stop = "length"
        try:
            with torch.no_grad(), disable_sdpa():
                if self.hush_word is None:
                    audio_features = model.encoder(mel.unsqueeze(0))
                else:
                    from training.hush_word.frontend import encode

                    audio_features = encode(model, mel.unsqueeze(0))
                x = torch.tensor([prefix], dtype=torch.long, device=model.device)
                n_tokens = len(prefix)
                suppress_first = (self._suppress_first if not is_last or not self._emitted
                                  else self._suppress_blank)
                while n_tokens < self.n_text_ctx:
                    current.clear()
                    logits = model.decoder(x, audio_features, kv_cache=cache)[0, -1].float()
                    if len(current) != len(self._align_heads):
                        raise RuntimeError("no cross-attention weights captured (is SDPA still on?)")
                    rows.append(torch.cat([current[layer] for layer in sorted(current)], dim=0))
                    if not new:
                        logits[suppress_first] = -np.inf
                    logits[self._suppress] = -np.inf
                    token = int(logits.argmax())
                    if token == self.eot:
                        self.last_stop = "eot"
                        break
                    frame = self._most_attended(rows, content)
                    previous = new[-1] if new else prefix[-1]
                    if not is_last and self._last_attend - frame > self.rewind_threshold:
                        if previous >= self.eot:
                            self._last_attend = frame
                        else:  # the attention failed: this update emits nothing
                            self._last_attend = -self.rewind_threshold
                            new = []
                            self.last_stop = "rewind"
                            break
                    else:
                        self._last_attend = frame
                    threshold = self.final_frame_threshold if is_last else self.frame_threshold
                    if threshold is not None and content - frame <= threshold:
                        self.last_stop = "frame"
                        break
                    new.append(token)
                    n_tokens += 1
                    x = torch.tensor([[token]], dtype=torch.long, device=model.device)
        finally:
            for h in hooks:
                h.remove()
        self._step_tokens[-1].extend(new)
        self._emitted.extend(new)

    def _most_attended(self, rows: list[torch.Tensor], content: int) -> int:
        """Most attended real encoder frame of the newest decoder position (SimulStreaming's recipe)."""
        from whisper.timing import median_filter

        weights = torch.cat(rows, dim=1)  # (heads, positions, frames)
        std, mean = torch.std_mean(weights, dim=1, keepdim=True, unbiased=False)
        last = (weights[:, -1:, :] - mean) / std.clamp_min(1e-10)
        last = median_filter(last, self.medfilt_width)
        score = last.mean(dim=0)[0, : max(content, 1)]
        return int(score.argmax())
