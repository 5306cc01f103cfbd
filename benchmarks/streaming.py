"""Streaming benchmark: every system on the same real speech and weights, side by side in one run.

Systems (all behind training.streaming.events.StreamingRecognizer, timed by run_stream):
  causal        our engine (block-causal encoder + caches, streaming greedy), original tiny.en weights:
                the non-fine-tuned causal Whisper of the paper
  causal_pad    the same, decoder sees silence after the heard frames (textdecoder.CrossCache)
  causal_pad_exact   causal_pad with the exact decoder settings (prefix re-run, fp32 vocabulary), 300 ms
  local_agreement2   LocalAgreement-2 re-transcription (ufal whisper_streaming algorithm), beam 5
  alignatt      AlignAtt (Simul-Whisper / SimulStreaming policy), greedy, frame_threshold 25
  offline       whole utterance at the end, 30 s padding (accuracy ceiling; latency = utterance length)
Metrics: training.streaming.evaluate (WER, RWER, ARWER, AL/LAAL/DAL (+ computation-aware), word latency,
per-chunk compute median/p90, RTF) and analytic encoder MACs (training.streaming.macs).
Re-encoding baselines cost seconds per chunk at small chunks, so by default they run on the 10-utterance
subset of measured-anchors.md (6 cmu_arctic + first 4 ljspeech) and the causal engine on all 39 as well.
Usage: python benchmarks/streaming.py [--realspeech PATH] [--chunks 40,100,200,300,1000] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import markdown_table, realspeech_path, write_results  # noqa: E402


def make_system(name: str, model, chunk_ms: int, hush_word=None):
    from training.streaming.baselines import AlignAtt, LocalAgreement2, OfflineWhisper
    from training.streaming.baselines.offline import hush_word_mel
    from training.streaming.engine import CausalStreamingEngine

    tau0 = max(600, chunk_ms)
    if name == "causal":
        return CausalStreamingEngine(model, chunk_ms, tau0)
    if name == "causal_pad":
        return CausalStreamingEngine(model, chunk_ms, tau0, pad_silence=True)
    if name == "causal_pad_exact":  # exact decoder prefix cache and fp32 vocabulary: what the fast settings cost
        return CausalStreamingEngine(model, chunk_ms, tau0, pad_silence=True, cache_policy="exact", int8_vocab=False)
    if name == "local_agreement2":
        return LocalAgreement2(model, beam_size=5)
    if name == "alignatt":
        return AlignAtt(model, frame_threshold=25)
    if name == "offline":
        return OfflineWhisper(model)
    if name == "alignatt_hush":  # the hush word instead of 30 s padding (--hush-word)
        return AlignAtt(model, frame_threshold=25, hush_word=hush_word, audio_max_s=29.0)
    if name == "local_agreement2_hush":
        return LocalAgreement2(model, beam_size=5, hush_word=hush_word)
    if name == "offline_hush":
        return OfflineWhisper(model, padding=hush_word_mel(model, hush_word))
    raise ValueError(name)


def mac_summary(dims, utterances, chunks: list[int]) -> dict:
    from training.streaming.macs import encoder_macs_offline, encoder_macs_stream, executed_padding

    offline = encoder_macs_offline(dims)
    out = {"offline_30s_pass": offline}
    for chunk in chunks:
        tau0 = max(600, chunk)
        rows, keys = executed_padding()  # as executed: the encoder's row and key padding counted
        full = encoder_macs_stream(dims, 1500, chunk, tau0, row_multiple=rows, key_multiple=keys)
        per_utt = [encoder_macs_stream(dims, len(u.audio) // 320, chunk, tau0, row_multiple=rows, key_multiple=keys)
                   / offline for u in utterances]
        out[f"{chunk}ms"] = {"stream_30s_vs_offline": round(full / offline, 4),
                             "utterance_stream_vs_offline_median": round(statistics.median(per_utt), 4)}
    return out


def log_plot_to_mlflow(results: dict, out_png: Path) -> str | None:
    """WER vs word latency per system and chunk size, logged as an MLflow artifact (local sqlite store)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, by_chunk in results.items():
        pts = sorted((v["word_latency_ms_median"], 100 * v["wer"], c) for c, v in by_chunk.items())
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=system)
        for x, y, c in pts:
            ax.annotate(c, (x, y), fontsize=7)
    ax.set_xlabel("median word latency, computation-aware (ms)")
    ax.set_ylabel("WER (%)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    try:
        import mlflow

        root = Path(__file__).resolve().parent.parent / "mlruns"
        mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
        mlflow.set_experiment("whisperline-streaming-benchmark")
        with mlflow.start_run(run_name="streaming-benchmark") as run:
            mlflow.log_figure(fig, "wer_vs_latency.png")
            for system, by_chunk in results.items():
                for chunk, v in by_chunk.items():
                    for key in ("wer", "arwer", "al_ms", "rtf", "chunk_compute_ms_median"):
                        if key in v:
                            mlflow.log_metric(f"{system}.{chunk}.{key}", float(v[key]))
            return run.info.run_id
    finally:
        plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realspeech", default=None)
    parser.add_argument("--chunks", default="40,100,200,300,1000")
    parser.add_argument("--systems", default="causal,causal_pad,causal_pad_exact,alignatt,local_agreement2,offline")
    parser.add_argument("--baseline-chunks", default="300,1000", help="chunk sizes for the re-encoding baselines")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument("--hush-word", default=None,
                        help="a trained hush word: adds alignatt_hush, local_agreement2_hush, offline_hush (no 30 s padding)")
    args = parser.parse_args()

    import torch

    from training.evaluation.sets import load_realspeech
    from training.streaming.evaluate import evaluate_records, stream_all
    from training.weights import load_model

    torch.set_num_threads(args.threads)
    model = load_model(args.model)
    hush_word = None
    if args.hush_word:
        from training.hush_word.frontend import load_hush_word

        hush_word = load_hush_word(args.hush_word)
        args.systems += ",alignatt_hush,local_agreement2_hush,offline_hush"
    root = realspeech_path(args.realspeech)
    subset = load_realspeech(root, ("cmu_arctic", "ljspeech"), limit={"ljspeech": 4})
    everything = load_realspeech(root)
    chunks = [int(c) for c in args.chunks.split(",")]
    baseline_chunks = [int(c) for c in args.baseline_chunks.split(",")]

    results: dict[str, dict[str, dict]] = {}
    started = time.time()
    for system in args.systems.split(","):
        sizes = ([1000] if system.startswith("offline") else [300] if system == "causal_pad_exact"
                 else chunks if system.startswith("causal") else baseline_chunks)
        for chunk in sizes:
            recognizer = make_system(system, model, chunk, hush_word)
            records = stream_all(recognizer, subset, chunk)
            row = evaluate_records(records, subset)
            if system == "causal" and chunk in (300, 1000):
                row["all_39"] = evaluate_records(stream_all(recognizer, everything, chunk), everything)
            results.setdefault(system, {})[f"{chunk}ms"] = row
            print(f"{system:17s} {chunk:5d} ms  WER {100 * row['wer']:6.2f}  chunk {row['chunk_compute_ms_median']:8.2f} ms"
                  f"  RTF {row['rtf']:.3f}  AL {row.get('al_ms', float('nan')):8.1f}", flush=True)

    def ratio(baseline: str) -> float | None:
        try:
            return round(results[baseline]["300ms"]["chunk_compute_ms_median"]
                         / results["causal"]["300ms"]["chunk_compute_ms_median"], 2)
        except KeyError:
            return None

    macs = mac_summary(model.dims, everything, chunks)
    out_png = Path(__file__).resolve().parent / "results" / "streaming_wer_latency.png"
    out_png.parent.mkdir(parents=True, exist_ok=True)
    run_id = log_plot_to_mlflow(results, out_png)
    payload = {
        "model": args.model,
        "torch_threads": args.threads,
        "utterances": {"subset": len(subset), "all": len(everything)},
        "wall_s": round(time.time() - started, 1),
        "latency_ratio_vs_localagreement_300ms": ratio("local_agreement2"),
        "latency_ratio_vs_alignatt_300ms": ratio("alignatt"),
        "encoder_mac_ratio_stream_vs_offline": macs.get("300ms", {}).get("stream_30s_vs_offline"),
        "rtf_causal_300ms": results.get("causal", {}).get("300ms", {}).get("rtf"),
        "encoder_macs": macs,
        "systems": results,
        "mlflow_run_id": run_id,
    }
    header = ["system", "chunk", "WER %", "RWER %", "ARWER %", "AL ms", "LAAL ms", "AL_CA ms", "word lat. median ms",
              "chunk compute median / p90 ms", "RTF"]
    rows = [[s, c, f"{100 * v['wer']:.2f}", f"{100 * v['rwer']:.2f}", f"{100 * v['arwer']:.2f}", v.get("al_ms"),
             v.get("laal_ms"), v.get("al_ca_ms"), v["word_latency_ms_median"],
             f"{v['chunk_compute_ms_median']} / {v['chunk_compute_ms_p90']}", v["rtf"]]
            for s, by_chunk in results.items() for c, v in by_chunk.items()]
    table = (f"Streaming on real speech, {args.model}, {args.threads} thread(s); subset = {len(subset)} utterances\n\n"
             + markdown_table(header, rows)
             + f"\n\nPer-chunk latency ratio at 300 ms: LocalAgreement-2 / causal = {payload['latency_ratio_vs_localagreement_300ms']},"
               f" AlignAtt / causal = {payload['latency_ratio_vs_alignatt_300ms']}; encoder MACs, 30 s stream / one offline"
               f" pass = {payload['encoder_mac_ratio_stream_vs_offline']}; RTF causal 300 ms = {payload['rtf_causal_300ms']}")
    write_results("streaming", payload, table)


if __name__ == "__main__":
    main()
