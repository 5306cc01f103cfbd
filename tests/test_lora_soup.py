"""A soup of LoRA adapters (``training.lora.soup``) on real tiny.en weights: its folded weights are the base plus
the mean of the runs' updates, it loads as any adapter, and adapters that cannot be averaged are refused."""

from __future__ import annotations

import json

import pytest
import torch

from configs.finetune import LoraSettings
from training.lora import AdapterError, apply_lora, load_adapter, merge_adapter, read_adapter_meta, save_adapter
from training.lora.soup import soup_adapters
from training.weights import checkpoint_sha256, load_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _trained(tmp_path, name: str, seed: int, chunk_ms: int = 300, **lora) -> tuple:
    """An adapter with seed-drawn A and a random B (a trained one's B is not zero), saved; (dir, folded model)."""
    settings = LoraSettings(**lora)
    model = load_model("tiny.en")
    apply_lora(model, settings, seed=seed)
    generator = torch.Generator().manual_seed(100 + seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if ".lora_B." in n:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
    meta = {"base_model": "tiny.en", "base_sha256": checkpoint_sha256("tiny.en"), "chunk_ms": chunk_ms,
            "tau0_ms": 600, "run_key": f"key-{name}", "train_splits": ["train"],
            "datasets": [{"version_id": f"v-{name}", "path": f"/data/{name}"}]}
    directory = save_adapter(model, settings, tmp_path / name, meta)
    merge_adapter(model)
    return directory, model


def test_soup_is_the_mean_update_and_loads_as_an_adapter(tmp_path):
    base = load_model("tiny.en")
    ingredients = [_trained(tmp_path, f"seed{s}", s, r=4) for s in (1, 2, 3)]
    soup = soup_adapters([d for d, _ in ingredients], tmp_path / "soup")

    meta = read_adapter_meta(soup)
    assert meta["lora"]["r"] == 12 and meta["lora"]["alpha"] / meta["lora"]["r"] == 32.0 / 4
    assert [i["run_key"] for i in meta["soup_of"]] == ["key-seed1", "key-seed2", "key-seed3"]
    assert [d["version_id"] for d in meta["datasets"]] == ["v-seed1", "v-seed2", "v-seed3"]
    assert meta["chunk_ms"] == 300 and meta["base_sha256"] == checkpoint_sha256("tiny.en")

    folded = load_model("tiny.en")
    load_adapter(folded, soup, base_sha256=checkpoint_sha256("tiny.en"))
    assert merge_adapter(folded) == 48
    weights = dict(folded.named_parameters())
    checked = 0
    for name, w0 in base.named_parameters():
        runs = [dict(m.named_parameters())[name] for _, m in ingredients]
        mean = w0 + sum(w - w0 for w in runs) / len(runs)
        assert torch.allclose(weights[name], mean, atol=1e-6), name
        if not torch.equal(runs[0], w0):  # an adapted projection: the soup is none of its ingredients
            checked += 1
            assert not torch.allclose(weights[name], runs[0], atol=1e-4)
    assert checked == 48  # the weights of 48 projections (LoRA leaves biases as they are)


def test_soup_takes_adapters_of_other_ranks_at_the_same_scale(tmp_path):
    a, model_a = _trained(tmp_path, "a", 1, r=4, alpha=8.0)
    b, model_b = _trained(tmp_path, "b", 2, r=8, alpha=16.0)
    folded = load_model("tiny.en")
    load_adapter(folded, soup_adapters([a, b], tmp_path / "soup"))
    merge_adapter(folded)
    base = dict(load_model("tiny.en").named_parameters())
    name = "encoder.blocks.0.attn.query.weight"
    expected = base[name] + ((dict(model_a.named_parameters())[name] - base[name])
                             + (dict(model_b.named_parameters())[name] - base[name])) / 2
    assert torch.allclose(dict(folded.named_parameters())[name], expected, atol=1e-6)


def test_soup_refuses_what_cannot_be_averaged(tmp_path):
    a, _ = _trained(tmp_path, "a", 1, r=4)
    other_chunk, _ = _trained(tmp_path, "b", 2, chunk_ms=100, r=4)
    other_scale, _ = _trained(tmp_path, "c", 3, r=4, alpha=4.0)
    other_targets, _ = _trained(tmp_path, "d", 4, r=4, targets=("encoder.attn",))
    with pytest.raises(AdapterError, match="at least 2"):
        soup_adapters([a], tmp_path / "s1")
    with pytest.raises(AdapterError, match="chunk_ms"):
        soup_adapters([a, other_chunk], tmp_path / "s2")
    with pytest.raises(AdapterError, match="LoRA settings"):
        soup_adapters([a, other_scale], tmp_path / "s3")
    with pytest.raises(AdapterError, match="LoRA settings"):
        soup_adapters([a, other_targets], tmp_path / "s4")
    meta = json.loads((a / "whisperline_adapter.json").read_text())
    other_base = tmp_path / "e"
    other_base.mkdir()
    for f in a.iterdir():
        (other_base / f.name).write_bytes(f.read_bytes())
    (other_base / "whisperline_adapter.json").write_text(json.dumps({**meta, "base_sha256": "0" * 64}))
    with pytest.raises(AdapterError, match="base_sha256"):
        soup_adapters([a, other_base], tmp_path / "s5")
    assert not any((tmp_path / f"s{i}").exists() for i in range(1, 6))
