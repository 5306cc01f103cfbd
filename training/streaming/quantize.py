"""int8 dynamic quantization of Whisper's Linear layers for CPU streaming (inference only).

A streaming step multiplies few rows (one block of ~15 encoder frames, 1–3 decoder tokens) by every weight matrix:
on CPU that is bound by reading the weights and by fp32 GEMM throughput. ``torch.ao`` dynamic quantization keeps
int8 weights (a quarter of the bytes) and runs VNNI int8 GEMMs with activations quantized on the fly; per-channel
weight scales (one per output row) keep the logits close enough that the stability rule decides as in fp32.
Measured on the real dev split (tiny.en, 2 threads): 2.2–2.3× faster steps at 40/100/300 ms, WER within ±2 words of
fp32 either way (per-tensor scales cost 4 words at 300 ms; the held-out numbers are in benchmarks/results/streaming.md).

Whisper's ``Linear`` subclasses ``nn.Linear`` (it casts the weight to the input's dtype), so ``quantize_dynamic``'s
type-keyed module mapping would silently skip it: each layer is copied into a plain ``nn.Linear`` first.
Convolutions, layer norms, embeddings and the vocabulary projection (``CachedTextDecoder(int8_vocab=...)``) stay
as they are.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn


def quantize_linears(model: nn.Module, per_channel: bool = True) -> int:
    """Replace every Linear under ``model`` by an int8 dynamically quantized one, in place; returns how many.

    The model can no longer be trained, have adapters merged, or be saved as float weights: quantize a copy
    loaded for inference (``training.causal.evaluate.load_tuned(..., int8=True)``)."""
    if any("lora_" in n for n, _ in model.named_parameters()):
        raise ValueError("merge the LoRA adapter before quantizing (training.lora.merge_adapter)")
    qconfig = (torch.ao.quantization.per_channel_dynamic_qconfig if per_channel
               else torch.ao.quantization.default_dynamic_qconfig)
    replaced = 0
    with warnings.catch_warnings():
        # torch announces the eager-mode API's move to torchao; it still works and torchao is not a dependency
        warnings.filterwarnings("ignore", category=UserWarning, message=r"(?s).*quantiz")
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r"(?s).*quantiz")
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if not isinstance(child, nn.Linear):
                    continue
                plain = nn.Linear(child.in_features, child.out_features, bias=child.bias is not None)
                plain.load_state_dict({k: v.float() for k, v in child.state_dict().items()})
                plain.qconfig = qconfig
                setattr(parent, name, torch.ao.nn.quantized.dynamic.Linear.from_float(plain))
                replaced += 1
    return replaced


__all__ = ["quantize_linears"]
