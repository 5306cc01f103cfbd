"""A dataset build over a real multi-node Ray cluster with a worker node killed mid-build (issue 30).

The cluster runs on this machine: a head node with no CPUs (nothing of the build can land there) and three worker
nodes of one CPU each, each its own raylet (``ray.cluster_utils.Cluster``: the processes `ray start` runs). The build
(`run_build`, Ray Data's actor pool of 2 aligners) runs against the cluster's address; once a few batch parts are
in the work store, a worker node that hosts an aligner actor is killed without warning (its raylet and every
process on it SIGKILLed). Ray Data restarts the lost actor on the spare node and retries its batch.

Reported (`node_killed_mid_build` in benchmarks/results/dataset_scale.json): the undisturbed build's and the
disturbed build's version id and the sha256 of every file of the published version, which must be identical;
when the node died (parts written before), how many batches there were, wall times.

Usage: python -m benchmarks.node_kill_build [--inputs 60] [--batch 2] [--out FILE]
(merges its result into dataset_scale.json unless --out; tests/test_build_scale.py runs it small)
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

import ray
from ray._private import state
from ray.cluster_utils import Cluster

from benchmarks.common import write_results
from benchmarks.dataset_scale import real_items, table
from configs.dataset import DatasetConfig
from data.assemble import file_hashes
from flows.build_dataset import run_build
from tasks.runtime import prefect_api


def _parts(output_root: Path) -> int:
    return len(list((output_root / ".work").rglob("*.parquet")))


def _actor_nodes() -> set[str]:
    """Nodes hosting a live Ray Data map actor (an aligner). Read from the GCS (the state API would need the
    dashboard, which this cluster does not run)."""
    return {info.get("Address", {}).get("NodeID") for info in state.actors().values()
            if "MapWorker" in str(info.get("ActorClassName")) and str(info.get("State")) in ("ALIVE", "2")}


def build_with_node_killed(corpus: str, output_root: Path, cfg, kill_after_parts: int = 3,
                           timeout_s: float = 900) -> dict:
    """The build on a fresh 1 + 3 node cluster; a worker node hosting an aligner killed after
    ``kill_after_parts`` parts. {summary, killed_node, parts_before_kill, wall_s}."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    nodes = [cluster.add_node(num_cpus=1) for _ in range(3)]
    cluster.wait_for_nodes()
    out: dict = {}

    def build() -> None:
        try:
            out["summary"] = run_build(corpus, str(output_root), cfg, workers=2, ray_address=cluster.address)
        except BaseException as e:  # reported by the caller
            out["error"] = e

    start = time.perf_counter()
    thread = threading.Thread(target=build, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout_s
        while _parts(output_root) < kill_after_parts and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        if not thread.is_alive():
            raise RuntimeError(f"the build ended before {kill_after_parts} parts: {out}")
        hosting = _actor_nodes() if ray.is_initialized() else set()
        victim = next((n for n in nodes if n.node_id in hosting), None)
        if victim is None:
            raise RuntimeError(f"no worker node hosts an aligner actor (actor nodes {hosting})")
        parts_before = _parts(output_root)
        cluster.remove_node(victim, allow_graceful=False)  # SIGKILL: its raylet, its actor, its object store
        thread.join(timeout=max(1.0, deadline - time.monotonic()))
        if thread.is_alive():
            raise RuntimeError("the build did not finish after the node was killed")
        if "error" in out:
            raise RuntimeError(f"the build failed after the node was killed: {out['error']!r}") from out["error"]
        return {"summary": out["summary"], "killed_node": victim.node_id, "parts_before_kill": parts_before,
                "wall_s": round(time.perf_counter() - start, 1)}
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def measure(corpus: str, workdir: Path, cfg) -> dict:
    with prefect_api():
        t0 = time.perf_counter()
        calm = run_build(corpus, str(workdir / "undisturbed"), cfg, workers=2)  # the process pool: the reference
        calm_s = time.perf_counter() - t0
        killed = build_with_node_killed(corpus, workdir / "node-killed", cfg)
    a, b = Path(calm["version_dir"]), Path(killed["summary"]["version_dir"])
    hashes_a, hashes_b = file_hashes(a), file_hashes(b)
    return {
        "cluster": "1 head (0 CPUs) + 3 worker nodes (1 CPU each), ray.cluster_utils.Cluster on one machine",
        "inputs": calm["counts"]["inputs"], "accepted": calm["counts"]["accepted"],
        "batches": -(-calm["counts"]["inputs"] // cfg.align_batch_size),
        "parts_before_kill": killed["parts_before_kill"],
        "undisturbed": {"runner": "pool", "version_id": calm["version_id"], "wall_s": round(calm_s, 1)},
        "node_killed": {"runner": "ray (actor pool of 2)", "version_id": killed["summary"]["version_id"],
                        "wall_s": killed["wall_s"]},
        "identical_version_id": calm["version_id"] == killed["summary"]["version_id"],
        "identical_files": hashes_a == hashes_b, "files": len(hashes_a),
        "shard_sha256": calm["shards"] if hashes_a == hashes_b else {"undisturbed": calm["shards"],
                                                                       "node_killed": killed["summary"]["shards"]},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=60)
    ap.add_argument("--batch", type=int, default=2, help="utterances per batch (many batches: a kill lands mid-build)")
    ap.add_argument("--out", type=Path, default=None,
                    help="write the result here instead of into benchmarks/results (the test's drill)")
    args = ap.parse_args()


    cfg = DatasetConfig(name="node-kill", shard_size=16, align_batch_size=args.batch, split_by="utterance")
    with tempfile.TemporaryDirectory(prefix="whisperline-node-kill-") as tmp:
        manifest = Path(tmp) / "inputs.jsonl"
        manifest.write_text("".join(json.dumps(r) + "\n" for r in real_items()[: args.inputs]), encoding="utf-8")
        result = measure(str(manifest), Path(tmp), cfg)
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
        return
    path = REPO / "benchmarks" / "results" / "dataset_scale.json"
    merged = json.loads(path.read_text())
    merged["node_killed_mid_build"] = result
    write_results("dataset_scale", merged, table(merged))


if __name__ == "__main__":
    main()
