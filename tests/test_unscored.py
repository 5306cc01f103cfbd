"""Which of issue 28's release rows are still to score (``benchmarks.evaluation._unscored``): only rows of the same
test split count as scored, so a new split is scored whole and an old report never stands in for it."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.evaluation import _seeds_scored, _unscored
from recognizer.spec import RecognizerSpec, Weights


def _report(path: Path, sha: str, specs: list) -> None:
    path.write_text(json.dumps({"test_set": {"audio_sha256": sha},
                                "systems": [{"name": s["name"], "spec": s} if isinstance(s, dict) else
                                            {"name": s.name, "spec": s.as_dict()} for s in specs]}))


def test_only_rows_of_the_same_split_are_scored(tmp_path):
    offline = RecognizerSpec("offline Whisper (ours, 30 s pad)", "offline", None)
    causal = RecognizerSpec("causal tuned 300 ms", "causal", 300, Weights(adapter_dir="/a/1"))
    report = tmp_path / "evaluation.json"
    assert _unscored([offline, causal], report, "new") == [offline, causal]  # no report yet
    _report(report, "old", [offline])
    assert _unscored([offline, causal], report, "new") == [offline, causal]  # another split: all of them
    assert _unscored([offline, causal], report, "old") == [causal]


def test_a_row_of_the_same_system_is_renamed_not_scored_again(tmp_path):
    report = tmp_path / "evaluation.json"
    _report(report, "s", [RecognizerSpec("old label", "causal", 300, Weights(adapter_dir="/a/1"))])
    assert _unscored([RecognizerSpec("causal tuned 300 ms", "causal", 300, Weights(adapter_dir="/a/1"))], report,
                     "s") == []
    assert json.loads(report.read_text())["systems"][0]["name"] == "causal tuned 300 ms"


def test_a_row_scored_under_the_old_spec_schema_is_the_same_system(tmp_path):
    report = tmp_path / "evaluation.json"
    _report(report, "s", [{"name": "causal tuned 300 ms", "kind": "causal", "chunk_ms": 300, "adapter_dir": "/a/1"},
                          {"name": "causal padded", "kind": "causal", "chunk_ms": 300, "pad_silence": True}])
    causal = RecognizerSpec("causal tuned 300 ms", "causal", 300, Weights(adapter_dir="/a/1"))
    beam = causal.with_(name="beam", decoding={"beam_size": 4})
    assert _unscored([causal, beam], report, "s") == [beam]  # the removed option's row stands for nothing


def test_the_seeds_of_a_committed_dev_result_are_its_greedy_300ms_rows():
    """A re-choice on a machine without the trained adapters (the peers re-selected alone) takes the seeds from the
    committed dev rows; a beam or cache row of a seed is not another seed."""
    names = ("faster-whisper offline", "causal tuned 300 ms seed 3407", "causal tuned 300 ms seed 1",
             "causal tuned 300 ms seed 3407 beam 4", "causal tuned 300 ms seed 2")
    rows = [{"name": n} for n in names]
    assert _seeds_scored({"systems": rows}) == [1, 2, 3407]
    assert _seeds_scored(None) == []
