"""oneDNN's kernel cache size on a served two-pass stream: regenerated kernels, compute per step, memory.

    python benchmarks/primitive_cache.py --minutes 5 --capacity 1024 --capacity 4096   # → results/primitive_cache.*

Each capacity runs in a fresh interpreter (oneDNN reads ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` once), streaming the
served spec (``selection/served_two_pass.json``) over the same continuous real speech (LJSpeech + CMU ARCTIC
utterances joined, repeated to ``--minutes``) at 2 torch threads with fixed feeding, with oneDNN's creation log
on (``ONEDNN_VERBOSE=profile_create``: every kernel created, from the cache or generated anew). Reported: kernels
generated (cache misses), step mean / median / p90 ms and the process's resident memory at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"

CHILD = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
import torch
from benchmarks.longform import repeated_speech, timed_steps
from evaluation.systems import SystemSpec, build

torch.set_num_threads(2)
spec = SystemSpec(**json.loads(Path(sys.argv[4]).read_text()))
stream, _ = repeated_speech(float(sys.argv[1]), Path(sys.argv[5]))
recognizer, _ = build(spec)
steps = [ms for _, ms in timed_steps(recognizer, stream.audio, spec.chunk_ms)]
rss = int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
Path(sys.argv[2]).write_text(json.dumps({"steps": steps, "rss_mb": rss, "seconds": len(stream.audio) / 16000}))
"""


def run(capacity: int, minutes: float, realspeech: Path) -> dict:
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        out, log = Path(tmp) / "out.json", Path(tmp) / "onednn.log"
        env = {**os.environ, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(capacity), "ONEDNN_VERBOSE": "profile_create"}
        with open(log, "w") as f:
            subprocess.run([sys.executable, "-c", CHILD, str(minutes), str(out), str(REPO),
                            str(RESULTS / "selection" / "served_two_pass.json"), str(realspeech)],
                           env=env, stdout=f, check=True)
        result = json.loads(out.read_text())
        created = [next(f for f in line.split(",") if f.startswith("create:")) for line in open(log)
                   if ",primitive,create:" in line]
    steps = np.array(result["steps"])
    return {"capacity": capacity, "seconds": round(result["seconds"], 1), "steps": len(steps),
            "kernels_generated": created.count("create:cache_miss"), "kernels_from_cache": created.count("create:cache_hit"),
            "step_ms_mean": round(float(steps.mean()), 1), "step_ms_median": round(float(np.median(steps)), 1),
            "step_ms_p90": round(float(np.percentile(steps, 90)), 1), "rss_mb": round(result["rss_mb"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--capacity", type=int, action="append")
    parser.add_argument("--realspeech", default=str(REPO.parent / "shared" / "data" / "realspeech"))
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    rows = [run(c, args.minutes, Path(args.realspeech)) for c in args.capacity or [1024, 4096]]
    result = {"spec": json.loads((RESULTS / "selection" / "served_two_pass.json").read_text())["name"],
              "torch_threads": 2, "feeding": "fixed", "rows": rows, "command": " ".join(["python", *sys.argv])}
    out = Path(args.out)
    (out / "primitive_cache.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [f"oneDNN kernel cache size, served two-pass spec ({result['spec']}), {rows[0]['seconds']} s of real "
             "speech streamed whole, 2 torch threads, fixed feeding; one run each.", "",
             "| capacity | kernels generated | from cache | step mean / median / p90 ms | RSS MB |", "|---|---|---|---|---|"]
    lines += [f"| {r['capacity']} | {r['kernels_generated']} | {r['kernels_from_cache']} | {r['step_ms_mean']} / "
              f"{r['step_ms_median']} / {r['step_ms_p90']} | {r['rss_mb']} |" for r in rows]
    (out / "primitive_cache.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
