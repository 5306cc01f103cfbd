"""Lower-precision Linear layers (int8 dynamic quantization, bfloat16) of real tiny.en weights: every Linear replaced,
outputs close to fp32, LoRA refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from configs.finetune import LoraSettings
from evaluation.sets import load_realspeech
from training.lora import apply_lora
from streaming.quantize import quantize_linears
from data.weights import load_model


@pytest.fixture(scope="module")
def utterance(realspeech: Path):
    return load_realspeech(realspeech, ("cmu_arctic",), limit={"cmu_arctic": 1})[0]


def test_every_linear_is_int8_and_the_encoder_output_stays_close(utterance):
    from streaming.encoder import CausalEncoder
    from streaming.frontend import causal_log_mel

    fp32, int8, encoder_only = load_model("tiny.en"), load_model("tiny.en"), load_model("tiny.en")
    n_linear = sum(isinstance(m, torch.nn.Linear) for m in fp32.modules())
    assert quantize_linears(int8, "all") == n_linear == 4 * 6 + 4 * 10  # encoder: q k v out + 2 mlp; decoder: 2 attns
    assert not any(isinstance(m, torch.nn.Linear) for m in int8.modules())
    assert quantize_linears(encoder_only) == 4 * 6  # the default scope
    assert sum(isinstance(m, torch.nn.Linear) for m in encoder_only.decoder.modules()) == 4 * 10
    with pytest.raises(ValueError, match="scope"):
        quantize_linears(load_model("tiny.en"), "decoder")
    mel = causal_log_mel(utterance.audio, 80, pad_end=True)[None]
    mel = mel[..., : mel.shape[-1] // 2 * 2]
    with torch.inference_mode():
        a, b = CausalEncoder(fp32.encoder, 300, 600)(mel), CausalEncoder(int8.encoder, 300, 600)(mel)
    error = float((a - b).norm() / a.norm())
    assert 0 < error < 0.15, error  # quantization noise (measured 8 %): not zero (it did something), well below the signal


def test_int8_transcript_of_real_speech_matches_fp32_closely(utterance):
    """Offline (the original weights are trained for it): the streaming original weights are too erratic on partial
    audio for a transcript comparison to say anything about quantization."""
    import jiwer

    from streaming.baselines.offline import OfflineWhisper
    from evaluation.streamed import stream_all

    fp32, int8 = load_model("tiny.en"), load_model("tiny.en")
    quantize_linears(int8, "all")
    texts = [stream_all(OfflineWhisper(m), [utterance], 1000)[0].text.lower() for m in (fp32, int8)]
    assert jiwer.wer(utterance.reference.lower(), texts[0]) < 0.2, texts
    out = jiwer.process_words(texts[0], texts[1])
    assert out.substitutions + out.deletions + out.insertions <= 1, texts  # a rare name may flip ("stieles")


def test_a_model_with_lora_layers_is_refused():
    model = load_model("tiny.en")
    apply_lora(model, LoraSettings(r=4), seed=0)
    with pytest.raises(ValueError, match="merge the LoRA adapter"):
        quantize_linears(model)
    assert not any(type(m).__module__.startswith("torch.ao") for m in model.modules())  # left untouched


def test_bf16_linears_stay_closer_to_fp32_than_int8(utterance):
    """bfloat16 keeps a relative error per element: the encoder output moves far less than with int8."""
    from streaming.encoder import CausalEncoder
    from streaming.frontend import causal_log_mel
    from streaming.quantize import BF16Linear, lower_precision

    fp32, bf16, int8 = load_model("tiny.en"), load_model("tiny.en"), load_model("tiny.en")
    assert lower_precision(bf16, "bf16-all") == 4 * 6 + 4 * 10
    assert lower_precision(int8, "int8-encoder") == 4 * 6
    assert not any(isinstance(m, torch.nn.Linear) for m in bf16.modules())
    assert all(m.weight.dtype == torch.bfloat16 for m in bf16.modules() if isinstance(m, BF16Linear))
    with pytest.raises(ValueError, match="precision"):
        lower_precision(load_model("tiny.en"), "fp16-all")
    mel = causal_log_mel(utterance.audio, 80, pad_end=True)[None]
    mel = mel[..., : mel.shape[-1] // 2 * 2]
    with torch.inference_mode():
        a, b, c = (CausalEncoder(m.encoder, 300, 600)(mel) for m in (fp32, bf16, int8))
    assert b.dtype == torch.float32  # activations, caches and logits stay fp32
    err_bf16, err_int8 = (float((a - x).norm() / a.norm()) for x in (b, c))
    assert 0 < err_bf16 < 0.03 and err_bf16 < err_int8 / 4, (err_bf16, err_int8)  # measured 1.0 % vs 8.5 %


def test_the_spec_offers_exactly_the_precisions_and_cache_policies_the_engine_has():
    # recognizer.spec spells the names out as Literals so that reading a spec does not import torch; this keeps the
    # two lists from drifting apart (a name only the spec knows would fail deep inside a run)
    from typing import get_args, get_type_hints

    from recognizer.spec import CausalPass, Weights
    from streaming.decoding import CachePolicy
    from streaming.quantize import REQUESTS

    assert set(get_args(get_type_hints(Weights)["precision"])) == set(REQUESTS)  # the lowerings, "auto", "fp32"
    assert set(get_args(get_type_hints(CausalPass)["cache_policy"])) == set(get_args(CachePolicy))
