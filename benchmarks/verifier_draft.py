"""The verifier's draft (speculative decoding, ``streaming.second_pass.Verifier``): the same final words, fewer steps?

    python benchmarks/verifier_draft.py --state outputs/bench-evaluation/state.json --out DIR/run.json
    python benchmarks/verifier_draft.py --compare A.json B.json        # → results/verifier_draft.{json,md}

Streams continuous *dev* speech (``benchmarks.longform.dev_streams``: each dev speaker's utterances joined into
streams of 20-120 s) through the served spec (``selection/served_two_pass.json``) at one torch thread, and records
every stream's final words, the verifier's decoder passes and the process's CPU seconds. Run it from two checkouts
(the commit before the draft and the one with it) and ``--compare`` the two records: the draft must leave every
final word as it was (greedy decoding reads the same argmax; only the floating-point order of one batched pass
against one-token steps differs) and it should run fewer decoder passes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import machine, markdown_table, write_results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


class _Counted:
    """The verifier, its calls counted; every other attribute passes through."""

    def __init__(self, inner, call) -> None:
        self._inner, self._call = inner, call

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)


def run(state: Path, seconds: float) -> dict:
    import torch

    from benchmarks.longform import dev_streams
    from evaluation.systems import SystemSpec, build
    from streaming.events import chunks

    torch.set_num_threads(1)
    spec = SystemSpec(**json.loads((RESULTS / "selection" / "served_two_pass.json").read_text()))
    recognizer, _ = build(spec)
    verifier = recognizer.inner.verifier
    counts = {"verifier_passes": 0, "decoder_passes": 0}
    call, run_ = verifier.__call__, verifier.base._run

    def counted_call(*args, **kwargs):
        counts["verifier_passes"] += 1
        return call(*args, **kwargs)

    def counted_run(*args, **kwargs):
        counts["decoder_passes"] += 1
        return run_(*args, **kwargs)

    verifier.base._run = counted_run  # instance attribute: this verifier's decoder only
    recognizer.inner.verifier = _Counted(verifier, counted_call)
    units, _ = dev_streams(json.loads(state.read_text()))
    finals, fed = [], 0.0
    cpu = time.process_time()
    for unit in units:
        recognizer.reset()
        for piece in chunks(unit.audio, spec.chunk_ms, recognizer.lookahead_ms):
            recognizer.feed(piece)
        finals.append(list(recognizer.finish().words))
        fed += len(unit.audio) / 16_000
        if fed >= seconds:
            break
    cpu = time.process_time() - cpu
    text = json.dumps(finals)
    return {"spec": spec.name, "streams": len(finals), "seconds": round(fed, 1), **counts, "cpu_s": round(cpu, 1),
            "final_words": sum(len(f) for f in finals), "finals_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "finals": finals, "machine": machine()}


def compare(a: dict, b: dict) -> dict:
    changed = [i for i, (x, y) in enumerate(zip(a["finals"], b["finals"], strict=True)) if x != y]
    return {"before": {k: v for k, v in a.items() if k != "finals"}, "after": {k: v for k, v in b.items() if k != "finals"},
            "identical_finals": a["finals_sha256"] == b["finals_sha256"], "streams_changed": changed,
            "cpu_ratio": round(b["cpu_s"] / a["cpu_s"], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", type=Path, default=Path("outputs/bench-evaluation/state.json"))
    ap.add_argument("--seconds", type=float, default=240.0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path)
    args = ap.parse_args()
    if args.compare:
        result = compare(*(json.loads(p.read_text()) for p in args.compare))
        result["command"] = "python benchmarks/verifier_draft.py " + " ".join(sys.argv[1:])
        rows = [[name, r["streams"], r["seconds"], r["verifier_passes"], r["decoder_passes"], r["cpu_s"],
                 r["final_words"], r["finals_sha256"][:12]]
                for name, r in (("without draft", result["before"]), ("with draft", result["after"]))]
        md = (f"Verifier draft on continuous dev speech, served spec, one torch thread "
              f"({result['after']['machine']['cpu_model']}).\n\n"
              + markdown_table(["", "streams", "audio s", "verifier passes", "decoder passes", "CPU s",
                                "final words", "finals sha256"], rows)
              + f"\n\nIdentical final words: {result['identical_finals']} (streams changed: "
                f"{result['streams_changed']}); decoder passes after / before: "
                f"{result['after']['decoder_passes'] / result['before']['decoder_passes']:.3f}; CPU after / before: "
                f"{result['cpu_ratio']} (process CPU seconds: they grow when other jobs share the cores, so the "
                "decoder passes, which do not, are the exact measure of the saving).\n")
        write_results("verifier_draft", result, md)
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(run(args.state, args.seconds)) + "\n")


if __name__ == "__main__":
    main()
