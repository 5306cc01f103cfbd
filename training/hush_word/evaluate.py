"""Compare input conditions on the same speech: WER, analytic encoder MACs, wall time and hallucinations.

Hallucinated words = hypothesis words inserted after the last reference word (jiwer alignment of the normalised
texts): the failure mode of unpadded Whisper, which keeps talking past the end of short inputs. A runaway is a
hypothesis over 1.5× the reference length.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import jiwer
import numpy as np

from streaming.hush.frontend import variable_length_view
from streaming.hush.transcribe import CONDITIONS, condition_mel, decode
from evaluation.metrics import wer_counts
from evaluation.metrics.text import normalized_words
from evaluation.sets import Utterance
from streaming.macs import encoder_macs_offline


def hallucinated_words(reference: str, hypothesis: str) -> int:
    ref, hyp = normalized_words(reference), normalized_words(hypothesis)
    if not hyp:
        return 0
    if not ref:
        return len(hyp)
    out = jiwer.process_words(" ".join(ref), " ".join(hyp))
    return sum(c.hyp_end_idx - c.hyp_start_idx for c in out.alignments[0]
               if c.type == "insert" and c.ref_start_idx >= len(ref))


def evaluate_conditions(model, utterances: Sequence[Utterance], hush: np.ndarray | None,
                        conditions: Sequence[str] = CONDITIONS) -> dict[str, dict]:
    view = variable_length_view(model)
    out = {}
    for condition in conditions:
        if condition == "hush" and hush is None:
            continue
        hyps, macs, frames, wall = [], [], [], []
        for utt in utterances:
            t0 = time.perf_counter()
            mel = condition_mel(model, utt.audio, condition, hush)
            hyps.append(decode(model, mel, view))
            wall.append(time.perf_counter() - t0)
            frames.append(mel.shape[-1] // 2)
            macs.append(encoder_macs_offline(model.dims, mel.shape[-1] // 2))
        refs = [u.reference for u in utterances]
        out[condition] = {
            "wer": wer_counts(refs, hyps).rate,
            "encoder_gmacs_mean": round(float(np.mean(macs)) / 1e9, 3),
            "encoder_frames_mean": round(float(np.mean(frames)), 1),
            "wall_s_total": round(sum(wall), 2),
            "wall_ms_median": round(statistics.median(wall) * 1000, 1),
            "hallucinated_words": sum(hallucinated_words(r, h) for r, h in zip(refs, hyps)),
            "runaways": sum(len(normalized_words(h)) > 1.5 * max(1, len(normalized_words(r)))
                            for r, h in zip(refs, hyps)),
            "hypotheses": hyps,
        }
    return out
