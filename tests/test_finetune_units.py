"""Causal fine-tuning building blocks: LoRA targets and adapters, the block mask in training, sample points and
labels, the batched decoder, per-rank batches. Real tiny.en weights and real speech."""

from __future__ import annotations

import math

import numpy as np
import pytest
import soundfile as sf
import torch
from whisper.tokenizer import get_tokenizer

from configs.finetune import FinetuneConfig, LoraSettings
from data.utterances import TrainUtterance, key_subset
from training.causal.data import collate, padded_mel, rank_batches
from training.causal.objective import SamplePointLoss, decoder_logits
from training.causal.samples import IGNORE, draw_sample_points, target_row, tokens_done, valid_boundaries
from training.lora import AdapterError, adapter_state_dict, apply_lora, load_adapter, merge_adapter, save_adapter
from streaming.encoder import CausalEncoder
from data.weights import checkpoint_sha256, load_model


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tokenizer():
    return get_tokenizer(False)


@pytest.fixture(scope="module")
def audio(realspeech) -> np.ndarray:
    samples, rate = sf.read(realspeech / "cmu_arctic" / "wav" / sorted((realspeech / "cmu_arctic" / "wav").iterdir())[0].name,
                            dtype="float32")
    assert rate == 16_000
    return samples


def _adapted(seed: int = 0, **lora) -> torch.nn.Module:
    model = load_model("tiny.en")
    apply_lora(model, LoraSettings(**lora), seed=seed)
    return model


def test_lora_targets_only_attention_and_only_adapters_train():
    model = _adapted(r=8)
    names = [n for n, m in model.named_modules() if hasattr(m, "lora_A")]
    # tiny.en: 4 encoder blocks × (q,k,v,out) + 4 decoder blocks × 2 attentions × (q,k,v,out)
    assert len(names) == 4 * 4 + 4 * 8
    assert all(n.split(".")[-1] in {"query", "key", "value", "out"} and ".mlp" not in n for n in names)
    assert any(".cross_attn." in n for n in names) and any(n.startswith("encoder.") for n in names)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    d = model.dims.n_audio_state
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 48 * 8 * (d + d)
    # B starts at zero: the adapted model is the base model until trained
    assert all(float(p.detach().abs().max()) == 0 for n, p in model.named_parameters() if ".lora_B." in n)


def test_carelesswhisper_init_is_larger_than_peft():
    peft_a = _adapted(r=8).encoder.blocks[0].attn.query.lora_A["default"].weight
    cw_a = _adapted(r=8, init="carelesswhisper").encoder.blocks[0].attn.query.lora_A["default"].weight
    assert float(cw_a.abs().max()) <= 1 / math.sqrt(8) + 1e-6
    assert float(cw_a.abs().max()) > 2 * float(peft_a.abs().max())


def test_adapter_round_trip_is_strict(tmp_path, audio):
    model = _adapted(r=4)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if ".lora_B." in n:
                p.normal_(std=0.02)
    sha = checkpoint_sha256("tiny.en")
    save_adapter(model, LoraSettings(r=4), tmp_path / "a", {"base_model": "tiny.en", "base_sha256": sha,
                                                            "chunk_ms": 300, "tau0_ms": 600})
    fresh = load_model("tiny.en")
    load_adapter(fresh, tmp_path / "a", base_sha256=sha)
    for key, value in adapter_state_dict(model).items():
        assert torch.equal(value, adapter_state_dict(fresh)[key])
    mel = padded_mel(audio, 2000, 0, 80)[None]
    with torch.no_grad():
        assert torch.equal(CausalEncoder(model.encoder, 300, 600)(mel), CausalEncoder(fresh.encoder, 300, 600)(mel))
    with pytest.raises(AdapterError, match="base weights"):
        load_adapter(load_model("tiny.en"), tmp_path / "a", base_sha256="0" * 64)
    with pytest.raises(AdapterError, match="already has LoRA"):
        load_adapter(fresh, tmp_path / "a")
    # merged for inference: plain Linear modules again, the same encoder output to float rounding
    merged = load_model("tiny.en")
    load_adapter(merged, tmp_path / "a", base_sha256=sha)
    assert merge_adapter(merged) == 48 and not any("lora_" in n for n, _ in merged.named_parameters())
    assert type(merged.encoder.blocks[0].attn.query) is type(load_model("tiny.en").encoder.blocks[0].attn.query)
    with torch.no_grad():
        adapted, folded = CausalEncoder(model.encoder, 300, 600)(mel), CausalEncoder(merged.encoder, 300, 600)(mel)
    assert torch.allclose(adapted, folded, atol=1e-3 * float(adapted.abs().max()))
    assert not torch.allclose(folded, CausalEncoder(load_model("tiny.en").encoder, 300, 600)(mel).detach(),
                              atol=1e-3 * float(adapted.abs().max()))  # the adapter is really in the weights
    # an adapter of another shape (rank 8 metadata, rank 4 tensors) must not load silently
    meta = (tmp_path / "a" / "whisperline_adapter.json").read_text().replace('"r": 4', '"r": 8')
    (tmp_path / "a" / "whisperline_adapter.json").write_text(meta)
    with pytest.raises(Exception):
        load_adapter(load_model("tiny.en"), tmp_path / "a")


def test_masked_training_sees_only_allowed_positions(audio):
    """Gradients of an early block's output reach the mel only inside that block (+ its 1-frame look-ahead),
    with LoRA active and in train mode; without the mask they reach the future (so the test can fail)."""
    model = _adapted(r=4, dropout=0.1)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if ".lora_B." in n:
                p.normal_(std=0.05)
    model.train()
    enc = CausalEncoder(model.encoder, 300, 600, exact=False)
    mel = padded_mel(audio, 2500, 0, 80)[None].clone().requires_grad_(True)
    out = enc(mel)  # [1, n, d]
    end = 45  # block ends at 30 (τ0), 45, 60, …: frames < 45 may see mel frames ≤ 2·45
    out[0, 30:45].sum().backward()
    g = mel.grad[0].abs().sum(0)
    assert float(g[: 2 * end + 1].sum()) > 0
    assert float(g[2 * end + 1 :].abs().max()) == 0.0
    lora_grads = [p.grad for n, p in model.named_parameters() if ".lora_" in n and n.startswith("encoder.")]
    assert all(gr is not None and float(gr.abs().sum()) > 0 for gr in lora_grads)
    mel.grad = None
    enc(mel, mask=None)[0, 30:45].sum().backward()
    assert float(mel.grad[0, :, 2 * end + 1 :].abs().max()) > 0


def test_sample_point_boundaries_and_draws():
    # 300 ms chunks, τ0 600 ms: block ends at 30, 45, 60, … frames
    b = valid_boundaries(n_frames=200, speech_end_ms=2000, chunk_ms=300, tau0_ms=600, margin_ms=1000)
    assert b == [30, 45, 60, 75, 90, 105, 120, 135, 150]  # ≤ (2000 + 1000) / 20 = 150
    assert valid_boundaries(100, 5000, 300, 600, 1000) == [30, 45, 60, 75, 90]  # capped by computed frames - 1
    rng = np.random.default_rng(0)
    drawn = draw_sample_points(b, 0.25, rng)
    assert len(drawn) == math.ceil(0.25 * len(b)) and drawn == sorted(set(drawn)) and set(drawn) <= set(b)
    assert len(draw_sample_points(b, 0.01, rng)) == 1
    assert draw_sample_points([], 0.5, rng) == []


def test_labels_tokens_ended_then_eot(tokenizer):
    prefix = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    tokens = tokenizer.encode(" the cat sat")
    ends = [300, 700, 900]
    assert tokens_done(ends, 699) == 1 and tokens_done(ends, 700) == 2 and tokens_done(ends, 5000) == 3
    row = target_row(prefix, tokenizer.eot, tokens, 2)
    assert row.inputs == prefix + tokens[:2]
    assert row.labels == [IGNORE] * (len(prefix) - 1) + tokens[:2] + [tokenizer.eot]
    done = target_row(prefix, tokenizer.eot, tokens, 3)  # everything ended: EOT at the end, never at position 0
    assert done.labels[-1] == tokenizer.eot and done.labels[: len(prefix) - 1] == [IGNORE] * (len(prefix) - 1)
    empty = target_row(prefix, tokenizer.eot, tokens, 0)  # nothing ended yet: wait
    assert empty.labels == [IGNORE] * (len(prefix) - 1) + [tokenizer.eot]


def test_batched_decoder_equals_whisper_on_truncated_audio(audio, tokenizer):
    model = load_model("tiny.en").eval()
    enc = CausalEncoder(model.encoder, 300, 600)
    mel = padded_mel(audio, len(audio) // 16, 0, 80)[None]
    prefix = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    toks = torch.tensor([prefix + tokenizer.encode(" please call stella")] * 2)
    with torch.no_grad():
        feats = enc(mel)
        logits, _ = decoder_logits(model.decoder, toks, toks.clone(), feats, torch.tensor([0, 0]),
                                   torch.tensor([45, feats.shape[1]]))
        n = toks.shape[1]
        for row, frames in ((0, 45), (1, feats.shape[1])):
            ref = model.decoder(toks[row : row + 1], feats[:, :frames])[0]
            # other matmul shapes than whisper's decoder: float32 rounding relative to the logits' scale
            # (the bound of tests/test_causal_encoder.py), not a fixed absolute tolerance that holds on some CPUs only
            diff = (logits[row * n : (row + 1) * n] - ref).abs().max().item()
            assert diff <= 1e-4 * ref.abs().max().item(), diff


def _utt(key: str, audio: np.ndarray, tokens: list[int], ends: list[int]) -> TrainUtterance:
    return TrainUtterance(key, "v", audio, "x", tuple(tokens), tuple(ends), (("x", 0, ends[-1]),))


def test_one_batch_one_step_lowers_the_loss(audio, tokenizer):
    """All sample points of a batch go through one backward and one optimizer step; repeating it lowers the loss."""
    model = _adapted(r=8)
    loss_fn = SamplePointLoss(model)
    tokens = tokenizer.encode(" author of the danger trail philip steels etc")
    ends = list(np.linspace(400, 2800, len(tokens)).astype(int))
    utts = [_utt("a", audio, tokens, ends), _utt("b", audio[: len(audio) // 2], tokens[:4], ends[:4])]
    prefix = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    batch = collate(utts, [padded_mel(u.audio, u.speech_end_ms, 1000, 80) for u in utts], chunk_ms=300,
                    tau0_ms=600, fraction=0.5, margin_ms=1000, prefix=prefix, eot=tokenizer.eot,
                    rng=np.random.default_rng(1))
    assert batch.n_points >= 2 and set(batch.row_utt.tolist()) == {0, 1}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    losses = []
    for _ in range(4):
        loss, n = loss_fn.loss(batch)
        assert int(n) == batch.n_targets
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < losses[0]


def test_rank_batches_equal_counts_and_seeded():
    for n in (5, 6, 37):
        per_rank = [rank_batches(n, 2, r, 4, seed=3, epoch=0) for r in (0, 1)]
        assert len(per_rank[0]) == len(per_rank[1]) >= 1
        assert all(len(b) == 4 for batches in per_rank for b in batches)
        assert rank_batches(n, 2, 0, 4, seed=3, epoch=0) == per_rank[0]
    a, b = (sum(rank_batches(37, 2, r, 4, seed=3, epoch=0), []) for r in (0, 1))
    assert not set(a) & set(b)  # disjoint when there are enough items
    assert rank_batches(37, 2, 0, 4, seed=3, epoch=1) != rank_batches(37, 2, 0, 4, seed=3, epoch=0)


def test_key_subset_is_nested_seed_free_and_keeps_order():
    """A learning curve over data size: each fraction's utterances lie inside every larger fraction's, the counts are
    ceil(fraction·n), the order is the dataset's, and nothing depends on a run's seed."""
    utts = [_utt(f"u{i:03d}", np.zeros(160, np.float32), [1], [10]) for i in range(37)]
    keys = {f: [u.key for u in key_subset(utts, f)] for f in (0.1, 0.25, 0.5, 1.0)}
    assert {f: len(k) for f, k in keys.items()} == {0.1: 4, 0.25: 10, 0.5: 19, 1.0: 37}
    assert set(keys[0.1]) < set(keys[0.25]) < set(keys[0.5]) < set(keys[1.0])
    assert all(k == sorted(k) for k in keys.values())  # the dataset's order (sorted by key), not the hash's
    assert keys[0.25] != [u.key for u in utts[:10]]  # a spread over the dataset, not its first keys
    assert key_subset(utts, 1.0) is utts
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="fraction"):
            key_subset(utts, bad)
    assert FinetuneConfig(datasets=("d",), train_fraction=0.5).config_hash() != FinetuneConfig(datasets=("d",)).config_hash()
    with pytest.raises(ValueError):
        FinetuneConfig(datasets=("d",), train_fraction=0)
    one = FinetuneConfig(datasets=("d",), dataset_fractions={"l2": 0.25})
    assert one.config_hash() != FinetuneConfig(datasets=("d",)).config_hash()
    with pytest.raises(ValueError, match="dataset_fractions"):
        FinetuneConfig(datasets=("d",), dataset_fractions={"l2": 0})


def test_a_named_dataset_takes_its_own_fraction(real_shards):
    """A learning curve over one corpus: ``fractions`` names a dataset (its dataset.json name) and takes its
    nested subset; the others keep ``fraction``."""
    from data.utterances import read_all

    whole = read_all([str(real_shards)], ["train"])
    half = read_all([str(real_shards)], ["train"], fractions={"real-train": 0.5})
    assert len(whole) == 6 and [u.key for u in half] == [u.key for u in key_subset(whole, 0.5)]
    assert len(read_all([str(real_shards)], ["train"], fractions={"another": 0.5})) == 6


def test_config_hash_and_chunk_defaults():
    cfg = FinetuneConfig(datasets=("d",))
    assert cfg.resolved_tau0_ms == 600 and cfg.fraction_for(300) == 0.25 and cfg.fraction_for(40) == 0.02
    assert cfg.for_chunk(1000).resolved_tau0_ms == 1000
    assert cfg.config_hash() == FinetuneConfig(datasets=("elsewhere",), num_workers=8).config_hash()
    assert cfg.config_hash() != cfg.for_chunk(100).config_hash()
    assert cfg.registered_name == "whisperline-causal-tiny.en-300ms"
    with pytest.raises(ValueError):
        FinetuneConfig(datasets=("d",), chunk_ms=250)
    with pytest.raises(ValueError):
        FinetuneConfig(datasets=("d",), chunk_ms_choices=(100, 1000), tau0_ms=600)


def test_random_chunk_config_takes_its_own_sizes():
    """The random-chunk adapter's sizes are its own (CLI --random-chunk-ms), not the per-chunk runs' sizes."""
    cfg = FinetuneConfig(datasets=("d",))
    rcs = cfg.for_random_chunks([300, 40, 100, 1000, 40])
    assert rcs.chunk_ms_choices == (40, 100, 300) and rcs.chunk_ms == 300 and rcs.variant == "rcs"
    assert cfg.for_chunk(1000).for_random_chunks([40, 200]).chunk_ms == 200  # validated at the largest size
    assert rcs.config_hash() != cfg.for_random_chunks([40, 300]).config_hash()
    with pytest.raises(ValueError, match="≤ 600 ms"):
        cfg.for_random_chunks([1000])
