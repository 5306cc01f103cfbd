"""Aligner benchmark: speed per core and word-boundary agreement, on real and synthetic speech.

For each available aligner (pocketsphinx, whisper-DTW, mfa when installed), one process, one thread:
  - × real time per core over the real speech (start-up measured apart),
  - mean / median |Δ| of word starts and ends between every pair of aligners on the real speech
    (no human labels exist here: agreement, not accuracy),
  - accuracy against the exact word timings of espeak-ng synthetic speech (the synthesizer knows
    where every word is), which is ground truth for that audio.
Usage: python -m benchmarks.align_speed [--realspeech PATH] [--n-synth 40] [--aligners pocketsphinx,whisper,mfa]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

import numpy as np


from benchmarks.common import markdown_table, realspeech_path, write_results

Item = tuple[str, np.ndarray, list[str]]  # utt_id, 16 kHz audio, normalized words


def load_folder_corpus(root: Path) -> list[Item]:
    """Every utterance of a folder corpus (or folder of folders) as (id, audio, normalized words)."""
    from data.audio import load_audio
    from data.corpus import read_corpus
    from data.text import transcript_words

    scan = read_corpus(root)
    return [(i.utt_id, load_audio(i.audio_path).samples, [w.norm for w in transcript_words(i.transcript)])
            for i in scan.items]


def measure_aligners(items: list[Item], aligners: list[str]) -> tuple[dict, dict[str, dict[str, list]]]:
    """Speed of each aligner on `items` and its spans: ({name: stats}, {name: {utt: spans}})."""
    import torch

    from data.aligners import get_aligner
    from data.types import AlignmentError

    torch.set_num_threads(1)
    stats: dict = {}
    spans: dict[str, dict[str, list]] = {}
    for name in aligners:
        try:
            start = time.perf_counter()
            aligner = get_aligner(name)
            aligner.version  # noqa: B018  (lazily built models load before the clock starts)
            startup = time.perf_counter() - start
        except Exception as err:  # an unavailable aligner is recorded, not fatal
            stats[name] = {"available": False, "reason": f"{type(err).__name__}: {err}"[:300]}
            continue
        aligner.align(items[0][1], items[0][2])  # warm-up: first-call allocations, JIT
        audio_s = compute_s = 0.0
        failures: list[str] = []
        spans[name] = {}
        for utt, audio, words in items:
            t0 = time.perf_counter()
            try:
                spans[name][utt] = aligner.align(audio, words)
            except AlignmentError as err:
                failures.append(f"{utt}: {err.reason}")
            compute_s += time.perf_counter() - t0
            audio_s += len(audio) / 16000
        stats[name] = {"available": True, "version": aligner.version, "utterances": len(items),
                       "audio_s": round(audio_s, 2), "compute_s": round(compute_s, 3),
                       "x_realtime_per_core": round(audio_s / compute_s, 2), "startup_s": round(startup, 2),
                       "failures": failures}
    return stats, spans


def boundary_differences(a: dict[str, list], b: dict[str, list]) -> dict:
    """|Δ start| and |Δ end| (ms) over the words both aligners aligned, in order."""
    starts: list[int] = []
    ends: list[int] = []
    for utt in sorted(set(a) & set(b)):
        if [s.word for s in a[utt]] != [s.word for s in b[utt]]:
            continue
        starts += [abs(x.start_ms - y.start_ms) for x, y in zip(a[utt], b[utt])]
        ends += [abs(x.end_ms - y.end_ms) for x, y in zip(a[utt], b[utt])]
    if not starts:
        return {"words": 0}
    both = np.array(starts + ends)
    return {"words": len(starts), "start_mean_ms": round(float(np.mean(starts)), 1),
            "start_median_ms": float(np.median(starts)), "end_mean_ms": round(float(np.mean(ends)), 1),
            "end_median_ms": float(np.median(ends)), "within_20ms": round(float((both <= 20).mean()), 3),
            "within_50ms": round(float((both <= 50).mean()), 3),
            "end_bias_ms": round(float(np.mean([x.end_ms - y.end_ms for u in sorted(set(a) & set(b))
                                                for x, y in zip(a[u], b[u])
                                                if len(a[u]) == len(b[u])])), 1)}


def espeak_truth(corpus: Path) -> dict[str, list]:
    from data.synth import read_word_alignments
    from data.types import WordSpan

    table = read_word_alignments(corpus / "word_alignments_espeak.tsv")
    return {utt: [WordSpan(w, s, e) for w, s, e in rows] for utt, rows in table.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realspeech", default=None)
    parser.add_argument("--n-synth", type=int, default=40)
    parser.add_argument("--aligners", default="pocketsphinx,whisper,mfa")
    args = parser.parse_args()
    names = [a for a in args.aligners.split(",") if a]

    real = load_folder_corpus(realspeech_path(args.realspeech))
    speed, real_spans = measure_aligners(real, names)
    agreement = {f"{a}~{b}": boundary_differences(real_spans[a], real_spans[b])
                 for a, b in itertools.combinations(sorted(real_spans), 2)}

    from data.synth import write_synthetic_corpus

    with tempfile.TemporaryDirectory(prefix="wl-align-") as tmp:
        synth_dir = write_synthetic_corpus(Path(tmp) / "synth", args.n_synth, seed=1, progress=False)
        synth = load_folder_corpus(synth_dir)
        synth_speed, synth_spans = measure_aligners(synth, sorted(real_spans))
        truth = espeak_truth(synth_dir)
    vs_truth = {name: boundary_differences(synth_spans[name], truth) for name in sorted(synth_spans)}

    result = {
        "real_speech": {"utterances": len(real), "audio_s": round(sum(len(a) for _, a, _ in real) / 16000, 1)},
        "synthetic": {"utterances": len(synth), "audio_s": round(sum(len(a) for _, a, _ in synth) / 16000, 1)},
        "align_x_realtime_per_core": {k: v.get("x_realtime_per_core") for k, v in speed.items()},
        "aligners": speed,
        "synthetic_speed": synth_speed,
        "agreement_real_speech": agreement,
        "accuracy_vs_espeak_truth": vs_truth,
    }
    rows = [[k, v.get("x_realtime_per_core", "—"), v.get("startup_s", "—"),
             len(v.get("failures", [])) if v.get("available") else v.get("reason", "")[:60]]
            for k, v in speed.items()]
    table = (f"Aligners on {len(real)} real utterances ({result['real_speech']['audio_s']} s), one core\n\n"
             + markdown_table(["aligner", "× real time / core", "start-up s", "failures"], rows))
    rows = [[pair, d.get("words"), d.get("start_mean_ms"), d.get("start_median_ms"), d.get("end_mean_ms"),
             d.get("end_median_ms"), d.get("within_50ms")] for pair, d in {**agreement, **{
                 f"{k} vs espeak truth (synthetic)": v for k, v in vs_truth.items()}}.items()]
    table += "\n\nWord boundaries (ms)\n\n" + markdown_table(
        ["pair", "words", "start mean", "start median", "end mean", "end median", "within 50 ms"], rows)
    write_results("align_speed", result, table)


if __name__ == "__main__":
    main()
