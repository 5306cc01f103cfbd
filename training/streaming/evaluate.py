"""Every streaming metric from `StreamRecord`s, the same way for every system.

- WER: final text vs reference (Whisper's EnglishTextNormalizer + jiwer).
- RWER / ARWER: the text shown after each step (`StreamRecord.snapshots`) against the reference prefix /
  the reference words that had ended by then (aligned word ends, e.g. pocketsphinx).
- AL / LAAL / DAL (SimulEval 1.1 definitions): delay of each output word = audio consumed when it was
  committed; the computation-aware variants (`*_CA`) add the wall time spent on the stream until then.
- Word latency: committed-at time (computation-aware) minus the aligned end of the matching reference word.
- Compute: per-step wall time (median / p90 over the feed steps), RTF = total compute / audio.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from training.metrics import (
    arwer_counts,
    corpus_latency,
    latency_scores,
    latency_summary,
    rwer_counts,
    wer_counts,
    word_emission_latencies,
)
from training.metrics.text import ErrorCounts
from training.streaming.events import StreamingRecognizer, StreamRecord, run_stream


LATENCY_KEYS = {"AL": "al_ms", "LAAL": "laal_ms", "DAL": "dal_ms", "AP": "ap",
                "AL_CA": "al_ca_ms", "LAAL_CA": "laal_ca_ms", "DAL_CA": "dal_ca_ms"}


@dataclass(frozen=True)
class Utterance:
    utt_id: str
    audio: np.ndarray  # float32, 16 kHz
    reference: str
    words: tuple[tuple[str, int, int], ...]  # aligned reference words (word, start_ms, end_ms)


def evaluate_records(records: Sequence[StreamRecord], utterances: Sequence[Utterance]) -> dict:
    refs = [u.reference for u in utterances]
    hyps = [r.text for r in records]
    rw = sum((rwer_counts(r.snapshots(), u.reference) for r, u in zip(records, utterances)), ErrorCounts())
    aw = sum((arwer_counts(r.snapshots(), [(w, e) for w, _, e in u.words]) for r, u in zip(records, utterances)),
             ErrorCounts())
    latencies = []
    word_lat = []
    for record, utt in zip(records, utterances, strict=True):
        finals = record.final_words()
        if finals:
            latencies.append(latency_scores([e.emission_ms for e in finals], record.audio_ms,
                                            len(utt.reference.split()), elapsed=[e.elapsed_ms for e in finals]))
        word_lat += [w.latency_ms for w in word_emission_latencies(
            [(e.word, e.elapsed_ms) for e in finals], [(w, e) for w, _, e in utt.words])]
    feed_ms = [s.compute_ms for r in records for s in r.steps if not s.final]
    audio_s = sum(r.audio_ms for r in records) / 1000
    compute_s = sum(sum(r.compute_ms) for r in records) / 1000
    lat = corpus_latency(latencies)
    chunk = latency_summary(feed_ms)
    words = latency_summary(word_lat)
    return {
        "utterances": len(records),
        "audio_s": round(audio_s, 2),
        "wer": wer_counts(refs, hyps).rate,
        "rwer": rw.rate,
        "arwer": aw.rate,
        **{name: round(lat[key], 2) for key, name in LATENCY_KEYS.items() if key in lat},
        "rtf": round(compute_s / audio_s, 4),
        "chunk_compute_ms_median": round(chunk["median"], 2),
        "chunk_compute_ms_p90": round(chunk["p90"], 2),
        "final_step_ms_median": round(statistics.median([r.steps[-1].compute_ms for r in records]), 2),
        "word_latency_ms_mean": round(words["mean"], 1),
        "word_latency_ms_median": round(words["median"], 1),
        "words_matched": len(word_lat),
    }


def stream_all(recognizer: StreamingRecognizer, utterances: Sequence[Utterance], chunk_ms: float) -> list[StreamRecord]:
    return [run_stream(recognizer, u.audio, chunk_ms) for u in utterances]


def load_realspeech(root, corpora: Sequence[str] = ("ljspeech", "cmu_arctic"), limit: dict[str, int] | None = None
                    ) -> list[Utterance]:
    """The real speech with its transcripts and the shipped pocketsphinx word alignment (read in place)."""
    from pathlib import Path

    import soundfile as sf

    from data.synth import read_word_alignments

    out = []
    for corpus in corpora:
        folder = Path(root) / corpus
        words = read_word_alignments(folder / "word_alignments_pocketsphinx.tsv")
        lines = folder.joinpath("transcripts.tsv").read_text(encoding="utf-8").splitlines()
        for line in lines[: (limit or {}).get(corpus)]:
            utt, text = line.split("\t", 1)
            audio, rate = sf.read(folder / "wav" / f"{utt}.wav", dtype="float32")
            if rate != 16_000:
                raise ValueError(f"{utt}: expected 16 kHz audio, got {rate}")
            out.append(Utterance(utt, audio, text, tuple(words[utt])))
    return out
