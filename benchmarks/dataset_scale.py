"""Dataset build at scale: process pool vs a local Ray instance vs the same build to a local S3 server.

Corpus of N inputs (N = 500, 2,000, 5,000 by default, each a prefix of the next): every real utterance of
../shared/data/realspeech and realspeech-more (read in place), N // 250 long-form recordings (60–120 s, synthetic
sentences with 0.4–0.9 s pauses, one transcript each) and espeak-ng synthesis for the rest — listed in one JSONL
manifest per size. Each build runs in its own process (`--one`), cold (a fresh output root: nothing reused), against
one shared Prefect server, so that its peak RSS is the driver's own (the pool's workers, Ray's actors and the Prefect
server are other processes; ``peak_rss_mb`` says why it is not ``ru_maxrss``). Reported per build: wall time,
inputs/s, × real time per core (audio seconds / wall / cores), the driver's peak RSS; shard hashes must be
identical between the runners (and S3).
Then the reject count the issue asks for: `too_long` among the long-form recordings.

Usage: python -m benchmarks.dataset_scale [--sizes 500,2000,5000] [--workers 2] [--s3-size 5000] [--workdir DIR]
       python -m benchmarks.dataset_scale --rss-only --sizes 500,5000,50000 --runners pool --synth-text short
           (driver RSS growth only; two-word espeak-ng phrases: the count matters there, not the hours)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from benchmarks.common import markdown_table, realspeech_path, write_results

LONG_EVERY = 250  # one long-form recording per this many inputs
CFG = {"name": "scale", "shard_size": 256, "align_batch_size": 32}


def real_items() -> list[dict]:
    from data.corpus import read_corpus

    roots = [realspeech_path(), Path(os.environ.get("WHISPERLINE_REALSPEECH_MORE",
                                                    REPO.parent / "shared" / "data" / "realspeech-more")).resolve()]
    rows = []
    for root in roots:
        for item in read_corpus(root).items:
            rows.append({"id": item.utt_id, "audio_path": item.audio_path, "text": item.transcript,
                         "speaker": item.speaker})
    return rows


# ``--synth-text short``: two-word phrases (1-2 s of espeak-ng speech) for the driver-memory runs, which need the
# input *count* (issue 30: 50,000) and not hours of audio; 40 × 40 distinct phrases, each said by many voices
_ADJECTIVES = ("red green blue small large quiet happy early late bright cold warm dark heavy light narrow wide "
               "young old gentle rapid silent golden wooden broken hidden famous simple noisy empty sudden proud "
               "tiny honest open clever lucky rough smooth").split()
_NOUNS = ("apple river window garden letter morning engine pocket silver table basket candle doctor forest island "
          "kitchen ladder market needle orange pencil rabbit saddle ticket valley wagon button castle dragon "
          "feather hammer jacket kettle lemon mirror novel parrot rocket shadow thunder").split()
SHORT_TEXTS = [f"{a} {n}" for a in _ADJECTIVES for n in _NOUNS]


def make_corpus(workdir: Path, n_max: int, synth_text: str = "builtin") -> dict[str, list[dict]]:
    """The inputs of the largest build, by kind; smaller builds take prefixes of each kind."""
    import numpy as np

    from data.longform_fixture import make_longform_recording, read_corpus_parts, write_longform_corpus
    from data.synth import write_synthetic_corpus

    real = real_items()
    n_long = n_max // LONG_EVERY
    n_synth = n_max - len(real) - n_long
    texts = SHORT_TEXTS if synth_text == "short" else None
    synth = write_synthetic_corpus(workdir / f"synth-{synth_text}", n_synth, texts=texts, seed=0, progress=False)
    parts_src = write_synthetic_corpus(workdir / "synth-long-parts", n_long * 30, seed=1, progress=False)
    parts = read_corpus_parts(parts_src)
    rng = np.random.default_rng(0)
    recordings, at = {}, 0
    for i in range(n_long):
        target_s, chosen, seconds = rng.uniform(60, 120), [], 0.0
        while seconds < target_s and at < len(parts):
            _, audio, text = parts[at]
            chosen.append((audio, text))
            seconds += len(audio) / 16000 + 0.65
            at += 1
        pauses = [int(p) for p in rng.integers(400, 900, size=len(chosen) - 1)]
        recordings[f"longform-{i:04d}"] = make_longform_recording(chosen, pauses, seed=i)
    long_dir = write_longform_corpus(workdir / "longform", recordings) if recordings else None
    synth_rows = [{"id": f"synth-{utt}", "audio_path": str(synth / "wav" / f"{utt}.wav"), "text": text,
                   "speaker": "espeak"} for utt, _, text in _tsv(synth)]
    long_rows = [{"id": utt, "audio_path": str(long_dir / "wav" / f"{utt}.wav"), "text": text, "speaker": "longform"}
                 for utt, _, text in _tsv(long_dir)] if long_dir else []
    return {"real": real, "long": long_rows, "synth": synth_rows}


def _tsv(folder: Path) -> list[tuple[str, None, str]]:
    lines = (folder / "transcripts.tsv").read_text(encoding="utf-8").splitlines()
    return [(u, None, t) for u, _, t in (line.partition("\t") for line in lines if "\t" in line)]


def manifest_for(workdir: Path, kinds: dict[str, list[dict]], n: int) -> tuple[Path, dict]:
    n_long = n // LONG_EVERY
    rows = kinds["real"][:n] + kinds["long"][:n_long]
    rows += kinds["synth"][: n - len(rows)]
    path = workdir / f"inputs-{n}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path, {"inputs": len(rows), "real": min(n, len(kinds["real"])), "long_form": n_long,
                  "synthetic": len(rows) - min(n, len(kinds["real"])) - n_long}


def one_build(spec: str, output_root: str, runner: str, workers: int) -> dict:
    """Runs in its own process: the build, and this (driver) process's peak RSS."""
    from configs.dataset import DatasetConfig
    from flows.build_dataset import run_build

    cfg = DatasetConfig(**CFG)
    start = time.perf_counter()
    summary = run_build(spec, output_root, cfg, workers=workers, ray_address="local" if runner == "ray" else None)
    wall = time.perf_counter() - start
    return {"wall_s": round(wall, 2), "driver_peak_rss_mb": peak_rss_mb(), "summary": summary}


PEAK_RSS_METHOD = "VmHWM of the build's own process"


def peak_rss_mb() -> float:
    """This process's own peak RSS: Linux's VmHWM (the high-water mark of this program's memory map). Not
    ``ru_maxrss``: Linux keeps that across ``execve``, so a build started by a parent that holds the corpus in memory
    (``make_corpus``: 2.2 GB at 50,000 inputs) would report the parent's size, not its own."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            return round(next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:")) / 1024, 1)
    except (OSError, StopIteration):
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_one(spec: Path, output_root: str, runner: str, workers: int, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-m", "benchmarks.dataset_scale", "--one", str(spec), output_root, runner, str(workers)],
                         cwd=REPO, capture_output=True, text=True, env=env, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{runner} build of {spec.name} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(sizes: list[int], workers: int, s3_size: int | None, workdir: Path,
            runners: tuple[str, ...] = ("pool", "ray"), synth_text: str = "builtin") -> dict:
    from tasks.runtime import prefect_api

    kinds = make_corpus(workdir, max(sizes), synth_text)
    builds = []
    with prefect_api() as api_url:
        env = {**os.environ, "PREFECT_API_URL": api_url}
        for n in sizes:
            spec, composition = manifest_for(workdir, kinds, n)
            for runner in runners:
                result = run_one(spec, str(workdir / f"out-{runner}-{n}"), runner, workers, env)
                builds.append(_row(n, runner, composition, result, workers))
                print(json.dumps({k: v for k, v in builds[-1].items() if k != "shards"}), flush=True)
        if s3_size:
            from tests.s3_server import local_s3_server

            spec, composition = manifest_for(workdir, kinds, s3_size)
            with local_s3_server() as server:
                s3_env = {**env, **server["env"]}
                _make_bucket(server["env"], "whisperline-bench")
                result = run_one(spec, "s3://whisperline-bench/datasets", "ray", workers, s3_env)
            builds.append(_row(s3_size, "ray→s3", composition, result, workers))
            print(json.dumps({k: v for k, v in builds[-1].items() if k != "shards"}), flush=True)
    return {"builds": builds, "identical": _identical(builds)}


def rss_growth(builds: list[dict]) -> dict[str, float]:
    """Per runner: the driver's peak RSS at its largest corpus over that at its smallest (builds in size order)."""
    by_runner: dict[str, list[float]] = {}
    for b in builds:
        by_runner.setdefault(b["runner"], []).append(b["driver_peak_rss_mb"])
    return {r: round(mb[-1] / mb[0], 3) for r, mb in by_runner.items()}


def _make_bucket(env: dict, name: str) -> None:
    import boto3

    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                 aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                 region_name=env.get("AWS_DEFAULT_REGION", "us-east-1")).create_bucket(Bucket=name)


def _row(n: int, runner: str, composition: dict, result: dict, workers: int) -> dict:
    s = result["summary"]
    c = s["counts"]
    audio_s = c["audio_ms"] / 1000
    return {"inputs": n, "runner": runner, "workers": workers, **{f"n_{k}": v for k, v in composition.items()},
            "wall_s": result["wall_s"], "inputs_per_s": round(n / result["wall_s"], 2),
            "x_realtime_per_core": round(audio_s / result["wall_s"] / workers, 1),
            "driver_peak_rss_mb": result["driver_peak_rss_mb"], "audio_h": round(audio_s / 3600, 2),
            "accepted": c["accepted"], "rejected": c["rejected"], "utterances": c["utterances"],
            "segmented_recordings": c["segmented_recordings"], "rejects_by_reason": c["rejects_by_reason"],
            "aligned_now": s["aligned_now"], "version_id": s["version_id"], "shards": s["shards"]}


def _identical(builds: list[dict]) -> dict:
    by_n: dict[int, set] = {}
    for b in builds:
        by_n.setdefault(b["inputs"], set()).add((b["version_id"], tuple(b["shards"])))
    return {str(n): len(v) == 1 for n, v in by_n.items()}


def longform_rejects(workdir: Path, builds: list[dict]) -> dict:
    """Reasons the long-form recordings were rejected for, in the largest pool build."""
    from data.manifest import read_rejects

    largest = max((b for b in builds if b["runner"] == "pool"), key=lambda b: b["inputs"])
    version = workdir / f"out-pool-{largest['inputs']}" / CFG["name"] / largest["version_id"]
    rows = [r for r in read_rejects(version).to_pylist() if r["id"].startswith("longform-")]
    return {"long_form_inputs": largest["n_long_form"], "segmented": largest["segmented_recordings"],
            "too_long": sum(r["reason"] == "too_long" for r in rows),
            "rejected": {r["id"]: f"{r['reason']}: {r['detail']}" for r in rows}}


def table(result: dict) -> str:
    rows = [[b["inputs"], b["runner"], b["n_long_form"], b["utterances"], b["audio_h"], b["wall_s"], b["inputs_per_s"],
             b["x_realtime_per_core"], b["driver_peak_rss_mb"], b["rejected"]] for b in result["builds"]]
    lines = ["## Dataset build at scale (cold builds, 2 cores)", "",
             markdown_table(["inputs", "runner", "long-form", "utterances out", "audio h", "wall s", "inputs/s",
                             "× real time per core", "driver peak RSS MB", "rejected"], rows), "",
             f"Identical shards and version between the runners (per size): {result['identical']}", "",
             f"Long-form: {json.dumps(result['long_form'])}", ""]
    rss = result.get("driver_rss_mb")
    if rss:
        lines += [f"- driver peak RSS by corpus size (runner:inputs → MB): {json.dumps(rss['peak_mb'])}, growth "
                  f"{json.dumps(rss['growth'])} ({rss.get('method', 'ru_maxrss')})", ""]
    pub = result.get("concurrent_publishers")
    if pub:
        lines += [f"- two publishers of one version, interleaved at every step ({pub['store']}): "
                  f"{pub['interleaved_steps']} steps, valid from step {pub['first_valid_at_step']}, invalid after "
                  f"that: {pub['invalid_after_published']}; ends valid and identical to a single build: "
                  f"{pub['ends_valid'] and pub['identical_to_single_build']}", ""]
    kill = result.get("node_killed_mid_build")  # benchmarks/node_kill_build.py
    if kill:
        lines += [f"- a worker node killed mid-build ({kill['cluster']}; after {kill['parts_before_kill']} of "
                  f"{kill['batches']} batch parts): version {kill['node_killed']['version_id']} against the "
                  f"undisturbed {kill['undisturbed']['version_id']}, identical version id "
                  f"{kill['identical_version_id']}, all {kill['files']} files identical {kill['identical_files']}", ""]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        spec, output_root, runner, workers = sys.argv[2:6]
        print(json.dumps(one_build(spec, output_root, runner, int(workers))))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="500,2000,5000")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--s3-size", type=int, default=5000, help="0: no S3 build")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--runners", default="pool,ray")
    ap.add_argument("--publishers-only", action="store_true",
                    help="re-run only the concurrent-publishers drill into `concurrent_publishers`")
    ap.add_argument("--rss-only", action="store_true",
                    help="re-measure only the driver's peak RSS at --sizes (with --runners) into `driver_rss_mb`")
    ap.add_argument("--merge", action="store_true",
                    help="with --rss-only: keep the committed driver-RSS builds of other sizes (one size per run)")
    ap.add_argument("--synth-text", choices=("builtin", "short"), default="builtin",
                    help="the espeak-ng inputs' texts: data.synth's sentences, or two-word phrases (SHORT_TEXTS)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="whisperline-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if args.publishers_only:  # the lock-step two-builder drill of tests/test_build_scale.py, its record merged
        report = workdir / "drills.jsonl"
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "tests/test_build_scale.py::test_two_builders_of_one_version_never_unpublish_it"],
                              cwd=REPO, env={**os.environ, "WHISPERLINE_DRILL_REPORT": str(report)})
        records = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
        if proc.returncode != 0 or not records:
            raise SystemExit(f"the concurrent-publishers drill failed (rc {proc.returncode})")
        result = json.loads((REPO / "benchmarks" / "results" / "dataset_scale.json").read_text())
        result["concurrent_publishers"] = {k: v for k, v in records[-1].items() if k != "drill"}
        write_results("dataset_scale", result, table(result))
        return
    if args.rss_only:  # the driver's memory against the corpus size (issue 30: 500 → 50,000 inputs ≤ 1.5×)
        result = json.loads((REPO / "benchmarks" / "results" / "dataset_scale.json").read_text())
        runs = measure(sizes, args.workers, None, workdir, runners=tuple(args.runners.split(",")),
                       synth_text=args.synth_text)["builds"]
        if args.merge:  # the committed runs of the sizes not re-run, in size order
            kept = [b for b in result.get("driver_rss_mb", {}).get("builds", [])
                    if (b["runner"], b["inputs"]) not in {(r["runner"], r["inputs"]) for r in runs}]
            runs = sorted(kept + runs, key=lambda b: (b["runner"], b["inputs"]))
        rss = {f"{b['runner']}:{b['inputs']}": b["driver_peak_rss_mb"] for b in runs}
        result["driver_rss_mb"] = {"peak_mb": rss, "builds": [{k: v for k, v in b.items() if k != "shards"}
                                                               for b in runs],
                                   "growth": rss_growth(runs), "method": PEAK_RSS_METHOD,
                                   "synthetic_texts": args.synth_text,
                                   "command": "python -m benchmarks.dataset_scale " + " ".join(sys.argv[1:])}
        write_results("dataset_scale", result, table(result))
        return
    result = measure(sizes, args.workers, args.s3_size or None, workdir)
    result["long_form"] = longform_rejects(workdir, result["builds"])
    for b in result["builds"]:
        b.pop("shards")
    result["config"] = CFG
    write_results("dataset_scale", result, table(result))


if __name__ == "__main__":
    main()
