"""The release's EMMA sweep (benchmarks.emma_release): one policy over the adopted adapter, on the adopted recipe's
training sets, its thresholds scored on dev only."""

from __future__ import annotations

from benchmarks.emma_release import THRESHOLDS, sweep_config


def test_the_sweep_trains_one_policy_on_the_recipe_over_the_adopted_adapter_and_validates_on_dev(tmp_path):
    names = ("synth", "kokoro_train", "l2", "real", "longform")
    state = {"datasets": {n: str(tmp_path / n) for n in names},
             "artifacts": {"adapter": {"adapter_dir": str(tmp_path / "adapter")}}}
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_model.safetensors").write_bytes(b"weights")  # hashed into the training key
    sweep = sweep_config(state, tmp_path / "out", f"sqlite:///{tmp_path / 'm.db'}", 40)
    trials = sweep.trial_configs()
    assert sorted(t.t_emma for t in trials) == sorted(THRESHOLDS)
    assert len({t.config_hash() for t in trials}) == 1  # one policy learned: a threshold never retrains
    base = sweep.base
    assert base.adapter_dir == str(tmp_path / "adapter") and base.encoder == "causal_lora"
    assert [str(d) for d in base.datasets] == [str(tmp_path / n) for n in ("synth", "kokoro_train", "l2")]
    assert [str(d) for d in base.validation_datasets] == [str(tmp_path / n) for n in ("real", "l2")]
    assert list(base.validation_splits) == ["dev"] and list(base.splits) == ["train"]
    assert base.validation_limit == 40 and base.tracking_uri.endswith("m.db")
