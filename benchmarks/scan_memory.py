"""The scan's memory: peak RSS of scanning a corpus and writing its inputs table, against the number of inputs.

    python benchmarks/scan_memory.py --manifest /path/inputs.jsonl --sizes 50000,281000
    # → benchmarks/results/scan_memory.{json,md}

Why: the build's driver holds the corpus from the first line read until the inputs table is written. A JSONL
manifest of ``n`` rows is made from the given one (its rows repeated with new ids, so every row is a distinct input
and the audio is real), and ``data.scan.scan`` + ``data.inputs.write_inputs_table`` run on it in a fresh process
(``--root``: the checkout whose code runs, to measure another commit the same way). Reported: the process's peak
RSS (VmHWM), the same process's RSS after imports, and the difference per input. LibriSpeech-960 has 281,241
utterances.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
from configs.dataset import DatasetConfig
import data.inputs, data.corpus, pyarrow.parquet  # imports counted in the base, not in the scan
try:
    from data.scan import scan
    from data.inputs import write_inputs_table
    def run(spec, cfg, work):
        table, rejects = scan(spec)
        return write_inputs_table(table, rejects, cfg, work)
except ImportError:  # before data.scan: the list-based scan
    from data import stages
    from data.inputs import write_inputs
    def run(spec, cfg, work):
        scanned, rejects = stages.scan(spec)
        return write_inputs(scanned, rejects, cfg, work)
cfg = DatasetConfig(name="scan-memory", split_by="auto", splits={"train": 0.8, "dev": 0.1, "test": 0.1})
base = rss("VmRSS")
t = time.perf_counter()
ref = run(sys.argv[2], cfg, sys.argv[3])
print(json.dumps({"rows": ref.rows, "rejects": ref.rejects, "digest": ref.digest, "seconds": time.perf_counter() - t,
                  "base_rss_mb": base, "peak_rss_mb": rss("VmHWM")}))
"""


def make_manifest(source: Path, n: int, out: Path) -> Path:
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    with out.open("w") as fh:
        for i in range(n):
            row = dict(rows[i % len(rows)])
            row["id"] = f"{row['id']}-r{i // len(rows)}"
            fh.write(json.dumps(row) + "\n")
    return out


def measure(root: Path, manifest: Path) -> dict:
    with tempfile.TemporaryDirectory() as work:
        out = subprocess.run([sys.executable, "-c", CHILD, str(root), str(manifest), work], capture_output=True,
                             text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", required=True, help="a JSONL manifest of real audio (rows are repeated)")
    parser.add_argument("--sizes", default="50000,281000")
    parser.add_argument("--root", default=str(REPO), help="the checkout whose scan runs")
    parser.add_argument("--label", default="HEAD")
    parser.add_argument("--merge", action="store_true", help="add to the committed results instead of replacing")
    args = parser.parse_args()
    path = RESULTS / "scan_memory.json"
    result = json.loads(path.read_text()) if args.merge and path.exists() else {"runs": []}
    commit = subprocess.run(["git", "-C", args.root, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            manifest = make_manifest(Path(args.manifest), n, Path(tmp) / f"inputs-{n}.jsonl")
            run = measure(Path(args.root), manifest)
            run.update({"inputs": n, "label": args.label, "commit": commit,
                        "scan_mb": round(run["peak_rss_mb"] - run["base_rss_mb"], 1)})
            run["kb_per_input"] = round(run["scan_mb"] * 1024 / n, 2)
            print(json.dumps(run), flush=True)
            result["runs"] = [r for r in result["runs"] if (r["label"], r["inputs"]) != (args.label, n)] + [run]
    result["machine"] = {"python": platform.python_version(), "cpu": platform.processor() or platform.machine()}
    result["command"] = " ".join(["python", *sys.argv])
    path.write_text(json.dumps(result, indent=1) + "\n")
    lines = ["# Scan memory: peak RSS of scan + inputs table, against inputs", "",
             "| code | commit | inputs | peak RSS MB | after imports MB | scan MB | KB per input | seconds |",
             "|---|---|---|---|---|---|---|---|"]
    for r in sorted(result["runs"], key=lambda r: (r["inputs"], r["label"])):
        lines.append(f"| {r['label']} | {r['commit']} | {r['inputs']:,} | {r['peak_rss_mb']:.1f} | "
                     f"{r['base_rss_mb']:.1f} | {r['scan_mb']:.1f} | {r['kb_per_input']:.2f} | {r['seconds']:.1f} |")
    (RESULTS / "scan_memory.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
