"""The GPU recipe screen's own logic (benchmarks/gpu_screen.py): the weights' two halves and the pooled report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is not an installed package
from benchmarks.gpu_screen import REFERENCE, join_bf16, report, split_bf16  # noqa: E402


def test_the_weight_halves_rebuild_the_bfloat16_rounded_tensors_exactly():
    g = torch.Generator().manual_seed(0)
    state = {"a": torch.randn(3, 5, generator=g, dtype=torch.float32).half(), "b": torch.tensor(2.5).half(),
             "c": (torch.randn(7, generator=g) * 1e4).half()}
    tensors, hi, lo = split_bf16(state)
    assert [n for n, _ in tensors] == ["a", "b", "c"] and len(hi) == len(lo) == 15 + 1 + 7
    rebuilt = join_bf16(tensors, hi, lo)
    for name, value in state.items():
        assert rebuilt[name].dtype == torch.float32 and rebuilt[name].shape == value.shape
        assert torch.equal(rebuilt[name], value.to(torch.bfloat16).float())
    with pytest.raises(ValueError, match="halves"):
        join_bf16(tensors, hi, lo[:-1])
    with pytest.raises(ValueError, match="index"):
        join_bf16(tensors[:2], hi, lo)


def _job(cell, seed: int, errors: list[int]) -> dict:
    weight, steps, lr, temperature = cell
    rows = [{"utt_id": f"u{i}", "ref_words": 10, "errors": e, "hyp": "", "partials_shown": 10,
             "partials_rewritten": 1, "compute_ms": 1.0, "audio_ms": 1000.0} for i, e in enumerate(errors)]
    return {"weight": weight, "steps": steps, "lr": lr, "temperature": temperature, "seed": seed,
            "train_s": 1.0, "score_s": 1.0, "wer": sum(errors) / (10 * len(errors)), "n_utterances": len(errors),
            "per_utterance": rows}


def test_the_report_pools_seeds_and_changes_the_recipe_only_for_a_separably_better_cell(tmp_path: Path):
    better, same = (0.25, 160, 1e-3, 2.0), (0.9, 160, 1e-3, 2.0)
    ref_errors = {1: [3, 4, 2, 5] * 10, 2: [4, 3, 5, 2] * 10}
    jobs = [_job(REFERENCE, s, e) for s, e in ref_errors.items()]
    jobs += [_job(same, s, list(reversed(e))) for s, e in ref_errors.items()]  # the same errors, other utterances
    results = tmp_path / "screen.jsonl"
    results.write_text("".join(json.dumps(j) + "\n" for j in jobs))
    report([results], tmp_path)
    summary = json.loads((tmp_path / "gpu_screen.json").read_text())
    cells = {(c["weight"], c["steps"]): c for c in summary["cells"]}
    assert cells[(0.5, 160)]["wer"] == pytest.approx(sum(map(sum, ref_errors.values())) / 800)
    assert cells[(0.5, 160)]["per_seed_wer"] == {"1": 0.35, "2": 0.35}
    assert cells[(0.9, 160)]["vs_reference"]["verdict"] == "not separable"
    assert "the recipe stays" in summary["decision"]

    results.write_text(results.read_text() + "".join(json.dumps(_job(better, s, [0, 1, 0, 1] * 10)) + "\n"
                                                     for s in (1, 2)))
    report([results], tmp_path)
    summary = json.loads((tmp_path / "gpu_screen.json").read_text())
    cells = {(c["weight"], c["steps"]): c for c in summary["cells"]}
    assert cells[(0.25, 160)]["vs_reference"]["verdict"] == "better"
    assert summary["decision"].startswith("change the recipe")
    assert "| 0.25 | 2.0 | 0.001 | 160 |" in (tmp_path / "gpu_screen.md").read_text()
