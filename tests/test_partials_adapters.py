"""Which adapters issue 28's release scores (``benchmarks.selection.partials_adapters``): read off the dev evidence
files alone, the newest training of the chosen recipe winning, and a pair trained for another recipe refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is not an installed package
from benchmarks.selection import partials_adapters  # noqa: E402


def _write(selection: Path, **files: dict) -> None:
    for name, body in files.items():
        (selection / f"{name}.json").write_text(json.dumps(body))


def _distill() -> dict:
    return {"chosen": "distilled", "adapters": {"distilled": "/a/distill-seed1"}, "seed": 1, "steps": 160}


def test_distill_and_rcs_evidence_alone(tmp_path):
    _write(tmp_path, dev_distill_choice=_distill(), dev_rcs_choice={"rcs_adapter": "/a/rcs-old"})
    out = partials_adapters(tmp_path)
    assert (out["per_chunk"], out["rcs"], out["steps"]) == ("/a/distill-seed1", "/a/rcs-old", 160)
    assert out["evidence"] == ["dev_distill_choice.json", "dev_rcs_choice.json"]


def test_restart_choice_names_the_same_seed(tmp_path):
    _write(tmp_path, dev_distill_choice=_distill(), dev_rcs_choice={"rcs_adapter": "/a/rcs-old"},
           dev_restart_choice={"adapters": {"1": "/a/restart-seed1", "2": "/a/restart-seed2"}})
    out = partials_adapters(tmp_path)
    assert out["per_chunk"] == "/a/restart-seed1" and "dev_restart_choice.json" in out["evidence"]


def test_the_pair_rcs_choice_trained_wins(tmp_path):
    rcs = {"rcs_adapter": "/a/rcs-new", "per_chunk_adapter": "/a/per-chunk-new", "seed": 1, "steps": 160}
    _write(tmp_path, dev_distill_choice=_distill(), dev_rcs_choice=rcs,
           dev_restart_choice={"adapters": {"1": "/a/restart-seed1"}})
    out = partials_adapters(tmp_path)
    assert (out["per_chunk"], out["rcs"]) == ("/a/per-chunk-new", "/a/rcs-new")


def test_a_pair_of_another_recipe_is_refused(tmp_path):
    rcs = {"rcs_adapter": "/a/rcs-new", "per_chunk_adapter": "/a/per-chunk-new", "seed": 2, "steps": 160}
    _write(tmp_path, dev_distill_choice=_distill(), dev_rcs_choice=rcs)
    with pytest.raises(ValueError, match="rcs_choice.py again"):
        partials_adapters(tmp_path)
