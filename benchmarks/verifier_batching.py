"""Would batching the verifier passes of concurrent streams make the served two-pass champion dense? Measured.

    python benchmarks/verifier_batching.py --state outputs/bench27/state.json   # → results/verifier_batching.*

Issue 27 asks for the verifier passes of concurrent streams to run batched (``@serve.batch`` or a micro-batcher),
so that the accurate recognizer is not also the expensive one. Whether that pays depends on what a pass is made
of and on how each part scales with the batch on a CPU, so both are measured before anything is built:

1. **What a pass is made of**: the served spec (``selection/served_two_pass.json``) streams the continuous *dev*
   speech (``longform.dev_streams``) at one torch thread (a served stream's); every verifier pass's encoder
   frames, forced-prefix tokens and one-token decoding steps are counted and its parts timed, beside the causal
   engine's own step.
2. **How each part scales**: the verifier's own modules on inputs of the mean pass's shape at batch sizes
   1, 2, 4, 8 (different random content per row, each row its own cross-attention keys/values, as different
   streams would have), per-row milliseconds. Rows of one length with no padding mask: an upper bound on what a
   batcher of streams with different window lengths would gain.

Projected per-stream compute for a second of audio at each batch size: causal steps (unbatched) + passes per
second × (encoder + prefix + steps per pass × one-token step) per row; and the streams two cores hold at that
cost (2 / per-stream compute; the serve-load criteria add a margin on top, so it is an upper bound too).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import machine  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BATCHES = (1, 2, 4, 8)


class Timed:
    """A callable wrapped to count and time its calls; attributes pass through (the verifier's ``word_ends``)."""

    def __init__(self, fn) -> None:
        self.fn, self.calls, self.ms = fn, 0, 0.0

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        out = self.fn(*args, **kwargs)
        self.ms += (time.perf_counter() - start) * 1000
        self.calls += 1
        return out

    def __getattr__(self, name: str):
        return getattr(self.fn, name)


def composition(spec, units, seconds: float) -> dict:
    """Stream the dev streams (``seconds`` of them at least) through the spec at one torch thread; what its
    verifier passes were made of and what each part cost per second of audio."""
    import torch

    from evaluation.systems import build
    from streaming.events import chunks

    torch.set_num_threads(1)
    recognizer, _ = build(spec)
    two_pass = recognizer.inner  # streaming.segmented.Segmented → TwoPassStreaming
    verifier = two_pass.verifier
    shape = Counter()
    encoder, run = Timed(verifier.encoder), Timed(verifier.base._run)

    def counted_encoder(mel, mask=None):
        out = encoder(mel, mask=mask)
        shape["encoder_frames"] += out.shape[1]
        return out

    def counted_run(cache, tokens, offset, logit_rows=None):
        shape["prefix_tokens" if offset == 0 else "token_steps"] += len(tokens) if offset == 0 else 1
        return run(cache, tokens, offset, logit_rows=logit_rows)

    verifier.encoder, verifier.base._run = counted_encoder, counted_run  # instance attributes: this verifier only
    two_pass.verifier = passes = Timed(verifier)
    two_pass.engine.feed = causal = Timed(two_pass.engine.feed)
    fed = 0.0
    for unit in units:
        recognizer.reset()
        for piece in chunks(unit.audio, spec.chunk_ms, recognizer.lookahead_ms):
            recognizer.feed(piece)
        fed += len(unit.audio) / 16_000
        if fed >= seconds:
            break
    n = max(1, passes.calls)
    per_s = {"causal": causal.ms, "verifier": passes.ms, "verifier_encoder": encoder.ms, "verifier_decoding": run.ms}
    return {"seconds": round(fed, 1), "steps": causal.calls, "passes": passes.calls,
            "passes_per_audio_s": round(passes.calls / fed, 3),
            "encoder_frames_per_pass": round(shape["encoder_frames"] / n, 1),
            "prefix_tokens_per_pass": round(shape["prefix_tokens"] / n, 1),
            "token_steps_per_pass": round(shape["token_steps"] / n, 2),
            "ms_per_audio_s": {k: round(v / fed, 1) for k, v in per_s.items()}}


def scaling(spec, frames: int, prefix_tokens: int, repeats: int = 5) -> list[dict]:
    """Per-row ms of the verifier's encoder, prefix run and one-token step at each batch size (module docstring)."""
    import torch

    from evaluation.systems import build

    torch.set_num_threads(1)
    recognizer, _ = build(spec)
    verifier = recognizer.inner.verifier
    decoder = verifier.base.decoder
    d = decoder.decoder.token_embedding.weight.shape[1]
    gen = torch.Generator().manual_seed(0)

    def best_ms(fn) -> float:
        fn()  # warm-up: oneDNN creates the kernels of new shapes once
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1000)
        return float(np.median(times))

    rows = []
    with torch.inference_mode():
        for b in BATCHES:
            mel = torch.randn(b, verifier.model.dims.n_mels, 2 * frames, generator=gen)
            audio = torch.randn(b, frames, d, generator=gen)
            cache = decoder.new_cache(batch=b)
            # each row its own audio: per-row cross-attention keys/values, as b different streams would have
            keys = decoder.project_audio(audio)
            cache.cross.k = [torch.nn.functional.pad(k, (0, 0, 0, 1500 - frames)) for k, _ in keys]
            cache.cross.v = [torch.nn.functional.pad(v, (0, 0, 0, 1500 - frames)) for _, v in keys]
            cache.cross.frames = frames
            prefix = torch.randint(0, 50_000, (b, prefix_tokens), generator=gen)
            encoder_ms = best_ms(lambda: verifier.encoder(mel, mask=None))
            prefix_ms = best_ms(lambda: decoder.forward(cache, prefix, 0, logit_rows=1))
            step_ms = best_ms(lambda: decoder.forward(cache, prefix[:, :1], prefix_tokens, logit_rows=1))
            rows.append({"batch": b, "encoder_ms_per_row": round(encoder_ms / b, 2),
                         "prefix_ms_per_row": round(prefix_ms / b, 2), "token_step_ms_per_row": round(step_ms / b, 2)})
    return rows


def project(comp: dict, rows: list[dict], cores: int = 2) -> list[dict]:
    """Per-stream compute (ms per second of audio) and the streams ``cores`` hold, at each batch size."""
    causal = comp["ms_per_audio_s"]["causal"]
    out = []
    for r in rows:
        per_pass = (r["encoder_ms_per_row"] + r["prefix_ms_per_row"]
                    + comp["token_steps_per_pass"] * r["token_step_ms_per_row"])
        per_s = causal + comp["passes_per_audio_s"] * per_pass
        out.append({"batch": r["batch"], "verifier_pass_ms_per_stream": round(per_pass, 1),
                    "compute_ms_per_audio_s": round(per_s, 1),
                    "streams_on_cores_at_most": round(cores * 1000 / per_s, 1)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench27/state.json")
    parser.add_argument("--seconds", type=float, default=120.0, help="dev speech to profile (whole streams)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    from benchmarks.longform import dev_streams
    from evaluation.systems import SystemSpec

    spec = SystemSpec(**json.loads((RESULTS / "selection" / "served_two_pass.json").read_text()))
    units, _ = dev_streams(json.loads(Path(args.state).read_text()))
    comp = composition(spec, units, args.seconds)
    rows = scaling(spec, int(round(comp["encoder_frames_per_pass"])), int(round(comp["prefix_tokens_per_pass"])))
    projected = project(comp, rows)
    result = {"spec": spec.name, "torch_threads": 1, "composition": comp, "scaling": rows, "projected": projected,
              "gain_at_8": round(projected[0]["compute_ms_per_audio_s"] / projected[-1]["compute_ms_per_audio_s"], 3),
              "machine": machine(), "command": " ".join(["python", *sys.argv])}
    out = Path(args.out)
    (out / "verifier_batching.json").write_text(json.dumps(result, indent=1) + "\n")
    c, ms = comp, comp["ms_per_audio_s"]
    lines = [f"Verifier batching across streams, served spec ({spec.name}), one torch thread, "
             f"{result['machine']['cpu_model']}.", "",
             f"**What a pass is made of** ({c['seconds']} s of continuous dev speech, {c['steps']} steps, "
             f"{c['passes']} verifier passes = {c['passes_per_audio_s']} per second of audio): "
             f"{c['encoder_frames_per_pass']} encoder frames, {c['prefix_tokens_per_pass']} forced-prefix tokens and "
             f"{c['token_steps_per_pass']} one-token steps per pass. Compute per second of audio: causal engine "
             f"{ms['causal']} ms, verifier {ms['verifier']} ms (encoder {ms['verifier_encoder']}, decoding "
             f"{ms['verifier_decoding']}).", "",
             "**How each part scales with the batch** (rows of the mean pass's shape, per-row ms; no padding: an upper "
             "bound on a batcher's gain):", "",
             "| batch | encoder ms/row | prefix ms/row | one-token step ms/row | verifier pass ms/stream | "
             "compute ms per audio s | streams on 2 cores (at most) |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['batch']} | {r['encoder_ms_per_row']} | {r['prefix_ms_per_row']} | {r['token_step_ms_per_row']} "
              f"| {p['verifier_pass_ms_per_stream']} | {p['compute_ms_per_audio_s']} "
              f"| {p['streams_on_cores_at_most']} |"
              for r, p in zip(rows, projected)]
    lines += ["", f"Batching 8 streams' passes: per-stream compute ÷ {result['gain_at_8']}."]
    (out / "verifier_batching.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
