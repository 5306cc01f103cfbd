"""Distillation from the full-context teacher: the adapter switch, the teacher's logits, the loss term."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
import torch.nn.functional as F
from pydantic import ValidationError
from whisper.tokenizer import get_tokenizer

from configs.finetune import DistillSettings, FinetuneConfig, LoraSettings
from data.utterances import TrainUtterance
from training.causal.data import collate, padded_mel
from training.causal.objective import SamplePointLoss, kl_teacher_student
from training.causal.samples import IGNORE
from training.lora import apply_lora
from training.lora.adapter import adapters_off
from data.weights import load_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TEXT = " author of the danger trail philip steels etc"


@pytest.fixture(scope="module")
def tokenizer():
    return get_tokenizer(False)


@pytest.fixture(scope="module")
def audio(realspeech) -> np.ndarray:
    wav = sorted((realspeech / "cmu_arctic" / "wav").iterdir())[0]
    samples, rate = sf.read(wav, dtype="float32")
    assert rate == 16_000
    return samples


def _adapted(seed: int = 0) -> torch.nn.Module:
    """tiny.en with a LoRA adapter whose B is not zero (a trained adapter changes the outputs)."""
    model = load_model("tiny.en")
    apply_lora(model, LoraSettings(r=4), seed=seed)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
    return model


def _batch(audio, tokenizer, seed: int = 1):
    tokens = tokenizer.encode(TEXT)
    ends = list(np.linspace(400, 2800, len(tokens)).astype(int))
    utts = [TrainUtterance(key, "v", a, "x", tuple(t), tuple(e), (("x", 0, e[-1]),))
            for key, a, t, e in (("a", audio, tokens, ends), ("b", audio[: len(audio) // 2], tokens[:4], ends[:4]))]
    prefix = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    return collate(utts, [padded_mel(u.audio, u.speech_end_ms, 1000, 80) for u in utts], chunk_ms=300, tau0_ms=600,
                   fraction=0.5, margin_ms=1000, prefix=prefix, eot=tokenizer.eot, rng=np.random.default_rng(seed))


def test_adapters_off_is_the_base_model_and_keeps_trainable_flags(audio):
    model, base = _adapted(), load_model("tiny.en")
    mel = padded_mel(audio, 3000, 1000, 80)[None, :, :600]
    from streaming.encoder import CausalEncoder

    def encode(m):
        return CausalEncoder(m.encoder, 20, 20, exact=False)(mel, mask=None)

    with torch.no_grad():
        adapted, plain = encode(model), encode(base)
        assert (adapted - plain).abs().max() > 1e-3  # the adapter changes the output
        trainable = {n for n, p in model.named_parameters() if p.requires_grad}
        with adapters_off(model):
            assert torch.allclose(encode(model), plain, atol=1e-5)
        assert {n for n, p in model.named_parameters() if p.requires_grad} == trainable and trainable
        assert torch.allclose(encode(model), adapted, atol=1e-6)  # switched back on


def test_teacher_sees_each_utterance_alone(audio, tokenizer):
    """Batch padding must not leak into the teacher's full attention: utterance b's teacher logits in a batch with a
    longer utterance equal its logits in a batch of its own."""
    model = _adapted()
    loss = SamplePointLoss(model, DistillSettings(weight=0.5), eot=tokenizer.eot)
    batch = _batch(audio, tokenizer)
    rows_b = batch.row_utt == 1
    assert rows_b.any() and (~rows_b).any()
    both = loss.teacher_logits(batch.mel, batch.tokens, batch.labels, batch.row_utt, batch.utt_frames)
    n_b = int(batch.utt_frames[1])
    alone = loss.teacher_logits(batch.mel[1:2, :, : 2 * n_b], batch.tokens[rows_b], batch.labels[rows_b],
                                torch.zeros(int(rows_b.sum()), dtype=torch.long), batch.utt_frames[1:2])
    positions = (batch.labels != IGNORE)
    in_b = rows_b[:, None].expand_as(positions)[positions]
    assert torch.allclose(both[in_b], alone, atol=1e-3)
    assert not any(p.requires_grad for p in [both, alone])


def test_distillation_term(audio, tokenizer):
    model = _adapted()
    batch = _batch(audio, tokenizer)
    off = SamplePointLoss(model)
    ce, n = off.loss(batch)
    assert off.last.keys() == {"ce"}
    on = SamplePointLoss(model, DistillSettings(weight=0.5, temperature=2.0), eot=tokenizer.eot)
    mixed, n2 = on.loss(batch)
    assert int(n) == int(n2) == batch.n_targets
    assert on.last["kd"] > 0 and np.isfinite(on.last["kd"])
    assert torch.isclose(mixed, 0.5 * ce + 0.5 * torch.tensor(on.last["kd"]), rtol=1e-4)
    mixed.backward()  # the gradient reaches the adapter only: the teacher ran without a graph
    assert all(p.grad is None for name, p in model.named_parameters() if "lora_" not in name)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for name, p in model.named_parameters() if "lora_" in name)
    with pytest.raises(ValueError, match="EOT"):
        SamplePointLoss(model, DistillSettings(weight=0.5))


def test_distilling_lowers_the_kl(audio, tokenizer):
    """A few optimizer steps on the distillation term alone bring the student closer to the teacher."""
    model = _adapted()
    loss_fn = SamplePointLoss(model, DistillSettings(weight=1.0, temperature=1.0), eot=tokenizer.eot)
    batch = _batch(audio, tokenizer)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    kls = []
    for _ in range(4):
        loss, _ = loss_fn.loss(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        kls.append(loss_fn.last["kd"])
    assert kls[-1] < kls[0]


def test_distill_settings_are_validated_and_in_the_config_hash():
    with pytest.raises(ValidationError):
        DistillSettings(weight=1.5)
    with pytest.raises(ValidationError):
        DistillSettings(temperature=0)
    base = FinetuneConfig(datasets=("x",))
    assert base.distill.weight > 0  # the dev-chosen recipe distils
    off = FinetuneConfig(datasets=("x",), distill=DistillSettings(weight=0.0))
    assert off.config_hash() != base.config_hash()


def test_kl_is_torch_s_and_ignores_what_the_teacher_cannot_say():
    g = torch.Generator().manual_seed(1)
    s, t = (torch.log_softmax(torch.randn(4, 50, generator=g), -1) for _ in range(2))
    full = F.kl_div(s, t, log_target=True, reduction="batchmean")
    assert torch.isclose(kl_teacher_student(t, s), full, atol=1e-6)
    assert float(kl_teacher_student(t, t)) == pytest.approx(0.0, abs=1e-6)
    holes = torch.log_softmax(torch.randn(4, 50, generator=g).masked_fill(torch.arange(50) % 3 == 0, float("-inf")), -1)
    kl = kl_teacher_student(holes, s)
    assert torch.isfinite(kl) and kl > 0
