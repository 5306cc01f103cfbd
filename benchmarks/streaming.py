"""Streaming speed benchmark: where a step's time goes, and our engine against the real PyPI peers, one run.

On the held-out ``test`` split of the evaluate stage (the datasets ``benchmarks/evaluation.py`` builds under
``--out``; its adapters are reused, nothing here trains):

1. **Profile** of one streaming step (``streaming.profiling``: front end, encoder, cross-attention K/V,
   decoder re-check, new tokens, vocabulary projection, Python) for tiny.en at 40/100/300/1000 ms and base at 300 ms,
   one profiled pass each (base with its 300 ms adapter at every size: the profile is about time).
2. **Speed rows** through the evaluate stage's harness (``evaluate_systems``: same audio, real-time-queue clock,
   medians of ``--repeats`` passes): every configuration optimised (adapter merged, Linear layers in bfloat16) and
   unoptimised (fp32, peft's LoRA layers); at 300 ms also the merge alone, int8 (encoder, all), the ``reuse``
   decoder cache, beam 4 both ways; at 40 ms int8 all.
3. **Peers**: whisperlivekit LocalAgreement-2 and SimulStreaming (PyPI) at 300 ms next to our tuned 300 ms engine on
   the first ``--peer-limit`` test utterances (they are slower than real time at 300 ms; the whole set three times
   would take most of an hour): the ratios are the peer's median step over ours, both from this run.

Writes ``benchmarks/results/streaming.json`` (top level: ``rtf_tiny_300ms``, ``rtf_tiny_40ms``, ``rtf_base_300ms``,
``step_p90_ms`` per chunk size, ``ratio_step_vs_whisperlivekit_la_300ms``,
``ratio_step_vs_whisperlivekit_simul_300ms``, ``encoder_mac_ratio_stream_vs_offline``) and ``streaming.md``.
The model named "base" is the multilingual base (the only base weights shipped on PyPI here; base.en has the same
dimensions, one vocabulary entry fewer).

Usage: python -m benchmarks.streaming --adapter DIR [--rcs-adapter DIR] [--base-adapter DIR] [--repeats 3]
       [--threads 2] [--peer-limit 12] [--out outputs/bench-evaluation]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from benchmarks.common import markdown_table, realspeech_path, write_results
from benchmarks.evaluation import build_datasets
from data.weights import load_model
from evaluation.peers import peers_available
from evaluation.sets import describe, load_split
from evaluation.streamed import stream_all
from recognizer.evaluate import evaluate_systems
from recognizer.spec import CausalPass, Decoding, RecognizerSpec, Weights
from streaming.engine import CausalStreamingEngine
from streaming.macs import encoder_macs_offline, encoder_macs_stream, executed_padding
from streaming.precision import native_bf16, resolve_precision
from streaming.profiling import StepProfile
from tasks.runtime import prefect_api
from training.causal.evaluate import load_tuned

CHUNKS = (40, 100, 300, 1000)


def mac_summary(dims, utterances, chunks) -> dict:
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


def configurations(args) -> list[tuple[str, str, str | None, int]]:
    """(name, model, adapter, chunk_ms): the tuned adapter at its 300 ms, the random-chunk one at the other sizes
    (the 300 ms one there too without ``--rcs-adapter``: speed rows),
    base with its 300 ms adapter (trained on the same splits tokenized with the multilingual vocabulary) or, without
    one, the original weights (speed only: they transcribe poorly)."""
    tiny = [(f"tiny.en {'tuned' if c == 300 or not args.rcs_adapter else 'random-chunk'} {c} ms", "tiny.en",
             args.adapter if c == 300 else args.rcs_adapter or args.adapter, c) for c in CHUNKS]
    base = ("base tuned 300 ms", "base", args.base_adapter, 300) if args.base_adapter else \
        ("base original weights 300 ms", "base", None, 300)
    return [*tiny, base]


def base_sizes(args) -> list[tuple[str, str, str | None, int]]:
    """base at the other chunk sizes, for the profile only (its adapter is trained at 300 ms)."""
    name, model, adapter, _ = configurations(args)[-1]
    return [(name.replace("300 ms", f"300 ms adapter at {c} ms"), model, adapter, c) for c in CHUNKS if c != 300]


def profile(configs, utterances, precision: str | None) -> list[dict]:
    effective = resolve_precision(precision).effective  # what load_tuned runs on this machine
    rows = []
    for name, model, adapter, chunk in configs:
        engine = CausalStreamingEngine(load_tuned(model, adapter, precision=precision), chunk, max(600, chunk))
        stream_all(engine, utterances[:1], chunk)  # warm-up, not profiled
        recorder = StepProfile().attach(engine)
        stream_all(engine, utterances, chunk)
        label = f"{name}, {effective}"
        rows.append({"name": label, "model": model, "chunk_ms": chunk, "precision": precision,
                     "precision_effective": effective,
                     "steps": len(recorder.steps),
                     "components": recorder.summary()})
        print(f"profile {label}: " + " ".join(f"{k} {v['mean_ms']:.2f} ms ({100 * v['share']:.0f} %)"
                                              for k, v in rows[-1]["components"].items()), flush=True)
    return rows


PRECISION = "bf16-all"  # the optimised engine's Linear layers (streaming.quantize)
OPTIMISED = "greedy"  # row-name suffixes: the optimised engine and its unoptimised twin (same adapter)
UNOPTIMISED = "greedy, unoptimised (fp32, LoRA unmerged)"


def speed_specs(args) -> list:
    """Every configuration optimised (adapter merged, Linear layers bf16) and unoptimised (fp32, LoRA layers), plus
    at 300 ms: fp32 merged (the merge alone), int8 encoder / all (also at 40 ms), the `reuse` decoder cache instead
    of `exact`, beam 4 both ways."""
    def causal(name: str, chunk: int, model: str, adapter: str | None, precision: str = "fp32", merge: bool = True,
               **groups) -> RecognizerSpec:
        return RecognizerSpec(name, "causal", chunk, Weights(model, adapter, merge, precision), **groups)

    specs = []
    for name, model, adapter, chunk in configurations(args):
        specs += [causal(f"{name} {OPTIMISED}", chunk, model, adapter, PRECISION),
                  causal(f"{name} {UNOPTIMISED}", chunk, model, adapter, merge=False)]
    tuned, rcs = ("tiny.en", args.adapter), ("tiny.en", args.rcs_adapter or args.adapter)
    small = "random-chunk" if args.rcs_adapter else "tuned"
    specs += [causal("tiny.en tuned 300 ms greedy, fp32 (merged)", 300, *tuned),
              causal("tiny.en tuned 300 ms greedy, int8 encoder", 300, *tuned, "int8-encoder"),
              causal("tiny.en tuned 300 ms greedy, int8 encoder + decoder", 300, *tuned, "int8-all"),
              causal(f"tiny.en {small} 40 ms greedy, int8 encoder + decoder", 40, *rcs, "int8-all"),
              causal("tiny.en tuned 300 ms greedy, reuse cache", 300, *tuned, PRECISION,
                     causal=CausalPass(cache_policy="reuse")),
              causal("tiny.en tuned 300 ms beam 4", 300, *tuned, PRECISION, decoding=Decoding(4)),
              causal("tiny.en tuned 300 ms beam 4, unoptimised (fp32, LoRA unmerged)", 300, *tuned, merge=False,
                     decoding=Decoding(4))]
    return specs


def peer_specs() -> list:
    from recognizer.build import peer_specs

    return peer_specs(300)


def headline(speed: dict, peers: dict | None) -> dict:
    rows = {r["name"]: r for r in speed["systems"]}
    base = next(r for r in speed["systems"] if r["name"].startswith("base ") and r["name"].endswith(OPTIMISED))
    p90 = {f"{r['chunk_ms']}ms": r["step_ms_p90"] for r in speed["systems"]
           if r["name"].startswith("tiny.en") and r["name"].endswith(f"ms {OPTIMISED}")}
    twins = {name[: -len(UNOPTIMISED)]: r for name, r in rows.items() if name.endswith(UNOPTIMISED)}
    wer_delta = {stem.strip(): round(100 * (rows[stem + OPTIMISED]["wer"] - twin["wer"]), 2)
                 for stem, twin in twins.items()}
    beam = "tiny.en tuned 300 ms beam 4"
    wer_delta[beam] = round(100 * (rows[beam]["wer"] - rows[f"{beam}, unoptimised (fp32, LoRA unmerged)"]["wer"]), 2)
    out = {"rtf_tiny_300ms": rows[f"tiny.en tuned 300 ms {OPTIMISED}"]["rtf"],
           "rtf_tiny_40ms": next(r["rtf"] for n, r in rows.items() if n.startswith("tiny.en") and
                                 n.endswith(f"40 ms {OPTIMISED}")),
           "rtf_base_300ms": base["rtf"], "step_p90_ms": p90,
           "step_p90_below_chunk": {k: v < int(k[:-2]) for k, v in p90.items()},
           "wer_points_optimised_minus_unoptimised": wer_delta}
    if peers:
        prow = {r["name"]: r for r in peers["systems"]}
        ours = prow[f"tiny.en tuned 300 ms {OPTIMISED}"]["step_ms_median"]
        for key, name in (("la", "whisperlivekit LocalAgreement-2 300 ms"),
                          ("simul", "whisperlivekit SimulStreaming 300 ms")):
            out[f"ratio_step_vs_whisperlivekit_{key}_300ms"] = round(prow[name]["step_ms_median"] / ours, 1)
    return out


def table(result: dict) -> str:
    lines = [f"Held-out test split: {result['test_set']['n_utterances']} utterances, {result['test_set']['seconds']} s; "
             f"{result['torch_threads']} torch threads; timings are medians of {result['repeats']} passes.", "",
             "## Where a step's time goes (mean ms per step, share of the step)", ""]
    names = ["frontend", "encoder", "cross_kv", "recheck", "new_tokens", "vocab", "python", "total"]
    lines.append(markdown_table(["configuration", "steps", *names], [
        [p["name"], p["steps"], *(f"{p['components'][n]['mean_ms']:.2f} ({100 * p['components'][n]['share']:.0f} %)"
                                  for n in names)] for p in result["profile"]]))
    lines += ["", "`vocab` is inside `recheck` and `new_tokens`; `python` is the rest of the step.", "",
              "## Speed on the test split", ""]
    header = ["system", "chunk ms", "WER", "step median / p90 ms", "RTF", "word latency median ms (queue)"]
    for block in ("speed", "one_thread", "peers"):
        if result.get(block):
            rows = [[r["name"], r["chunk_ms"], f"{100 * r['wer']:.2f} %", f"{r['step_ms_median']} / {r['step_ms_p90']}",
                     r["rtf"], r["word_latency_ms_median"]] for r in result[block]["systems"]]
            if block == "one_thread":
                lines += ["", "The optimised engine with 1 torch thread (a serving replica's share per stream):", ""]
            if block == "peers":
                lines += ["", f"Peers, side by side on the first {result['peer_utterances']} test utterances:", ""]
            lines.append(markdown_table(header, rows))
    keys = [k for k in result if k.startswith(("rtf_", "ratio_", "step_p90", "encoder_mac_ratio", "wer_points"))]
    lines += ["", "## Headline", "", *(f"- `{k}`: {result[k]}" for k in keys)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", required=True, help="the tuned 300 ms adapter (tiny.en)")
    parser.add_argument("--rcs-adapter", default=None,
                        help="a random-chunk adapter (tiny.en) for the other sizes (default: the 300 ms adapter)")
    parser.add_argument("--base-adapter", default=None, help="a 300 ms adapter for base (default: original weights)")
    parser.add_argument("--out", default="outputs/bench-evaluation", help="where benchmarks/evaluation.py built the data")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--peer-limit", type=int, default=12)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--limit", type=int, default=None, help="first N test utterances (smoke runs)")
    args = parser.parse_args()



    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    out = Path(args.out).resolve()
    os.environ.setdefault("PREFECT_HOME", str(out / ".prefect"))
    with prefect_api():  # content-addressed: the versions benchmarks/evaluation.py built are found, not rebuilt
        real = build_datasets(out, realspeech_path(None).parent, 240, ("real",))["real"]
    test = load_split(real, ["test"], limit=args.limit)
    warmup, scored = test[0], test[1:]
    test_set = describe(real, ["test"], scored)
    result: dict = {"test_set": test_set, "torch_threads": args.threads, "repeats": args.repeats}
    result["profile"] = [] if args.no_profile else [
        *profile(configurations(args) + base_sizes(args), scored, PRECISION),
        *profile(configurations(args)[2:3], scored, "int8-all"), *profile(configurations(args)[2:3], scored, None)]
    result["speed"] = evaluate_systems(speed_specs(args), scored, test_set=test_set, warmup=warmup,
                                       repeats=args.repeats)
    # one thread per stream (what a serving replica with several streams gives each): the same engines again
    torch.set_num_threads(1)
    one = [s for s in speed_specs(args) if s.name == f"tiny.en tuned 300 ms {OPTIMISED}"
           or (s.name.startswith("tiny.en") and s.name.endswith(f" 40 ms {OPTIMISED}"))]
    result["one_thread"] = evaluate_systems(one, scored, test_set=test_set, warmup=warmup, repeats=args.repeats)
    torch.set_num_threads(args.threads)
    peers = None
    if not args.no_peers:
        if peers_available():
            subset = scored[: args.peer_limit]
            ours = next(s for s in speed_specs(args) if s.name == f"tiny.en tuned 300 ms {OPTIMISED}")
            peers = evaluate_systems([ours, *peer_specs()], subset, warmup=warmup,
                                     test_set=describe(real, ["test"], subset), repeats=args.repeats)
            result["peer_utterances"] = len(subset)
    result["peers"] = peers
    result.update(headline(result["speed"], peers))
    for r in result["one_thread"]["systems"]:
        result[f"rtf_tiny_{r['chunk_ms']}ms_1_thread"] = r["rtf"]
    result["precision"] = {"optimised": PRECISION, "optimised_effective": resolve_precision(PRECISION).effective,
                           "bf16_native": native_bf16()}
    macs = mac_summary(load_model("tiny.en").dims, scored, CHUNKS)
    result["encoder_mac_ratio_stream_vs_offline"] = macs["300ms"]["stream_30s_vs_offline"]
    result["encoder_macs"] = macs
    result["wall_s"] = round(time.perf_counter() - started, 1)
    result["command"] = " ".join(["python", *sys.argv])
    for block in (result["speed"], result["one_thread"], peers):
        for r in (block or {}).get("systems", []):
            r.pop("hypotheses", None)
    write_results("streaming", result, table(result))


if __name__ == "__main__":
    main()
