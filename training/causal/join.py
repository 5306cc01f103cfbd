"""Joined utterances: training clips spoken one after another as one clip.

The recipe's synthetic clips last a few seconds; real speech runs to 25 s, where the causal adapter is furthest
from offline Whisper (docs/decisions/joined-clips.md). A block-causal adapter trained on short clips never saw the
later encoder positions, nor a decoder context of several sentences. Joining clips reaches both without new speech:
each clip keeps its audio (with its own leading and trailing silence), the next starts ``gap_ms`` of silence after
it, and its word and token end times move by its offset, so the joined clip is exactly supervised.

Deterministic per (seed, step, rank): a resumed run draws the same joins. Off (``p`` = 0) it draws nothing and
leaves the run's other draws unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from configs.finetune import JoinSettings
from data.utterances import TrainUtterance
from training.causal.data import SAMPLE_RATE


def join_utterances(parts: Sequence[TrainUtterance], gaps_ms: Sequence[int]) -> TrainUtterance:
    """``parts`` as one clip, ``gaps_ms[i]`` of silence between part i and i + 1; times follow each part."""
    if len(gaps_ms) != len(parts) - 1:
        raise ValueError(f"{len(parts)} parts need {len(parts) - 1} gaps, got {len(gaps_ms)}")
    pieces, token_ids, token_end_ms, words = [], [], [], []
    offset = 0  # samples
    for i, part in enumerate(parts):
        shift = offset * 1000 // SAMPLE_RATE
        pieces.append(part.audio.astype(np.float32))
        token_ids += part.token_ids
        token_end_ms += [t + shift for t in part.token_end_ms]
        words += [(w, s + shift, e + shift) for w, s, e in part.words]
        offset += len(part.audio)
        if i < len(gaps_ms):
            gap = int(gaps_ms[i]) * SAMPLE_RATE // 1000
            pieces.append(np.zeros(gap, np.float32))
            offset += gap
    first = parts[0]
    return dataclasses.replace(
        first, key="+".join(p.key for p in parts), audio=np.concatenate(pieces),
        transcript=" ".join(p.transcript.strip() for p in parts), token_ids=tuple(token_ids),
        token_end_ms=tuple(token_end_ms), words=tuple(words))


def join(first: TrainUtterance, pool: Sequence[TrainUtterance], settings: JoinSettings,
         rng: np.random.Generator) -> TrainUtterance:
    """With probability ``settings.p``, ``first`` followed by clips drawn from ``pool`` (else ``first`` as is):
    1 to ``max_utterances`` - 1 of them, as many as end their speech by ``max_s``."""
    if settings.p <= 0 or rng.random() >= settings.p:
        return first
    want = int(rng.integers(2, settings.max_utterances + 1))
    parts, gaps = [first], []
    end_ms = len(first.audio) * 1000 // SAMPLE_RATE
    for _ in range(want - 1):
        part = pool[int(rng.integers(len(pool)))]
        gap = int(rng.integers(settings.gap_ms[0], settings.gap_ms[1] + 1))
        if end_ms + gap + part.speech_end_ms > settings.max_s * 1000:
            break
        parts.append(part)
        gaps.append(gap)
        end_ms += gap + len(part.audio) * 1000 // SAMPLE_RATE
    return join_utterances(parts, gaps) if len(parts) > 1 else first


__all__ = ["join", "join_utterances"]
