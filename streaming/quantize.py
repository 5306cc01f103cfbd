"""Lower-precision Linear layers for CPU streaming (inference only): bfloat16 weights, or int8 dynamic quantization.

A streaming step multiplies few rows (one block of encoder frames, 1–3 decoder tokens) by every weight matrix: on
CPU that is bound by reading the weights and by fp32 GEMM throughput. int8 dynamic quantization (``torch.ao``, per
output-channel weight scales) reads a quarter of the bytes; bfloat16 (``BF16Linear``, fp32 accumulation) keeps a
relative error per element, so activation outliers cost it nothing, but is fast only where the CPU has bf16 dot
products (AMX, AVX512-BF16; ``streaming.precision.native_bf16``). Quantizing the decoder shifts the log-probabilities
the stability rule compares, so int8 defaults to the encoder only. Which one runs where:
docs/decisions/precision-per-cpu.md, precision-bf16-fidelity.md.

``precision`` strings name dtype and scope: ``"bf16-all"``, ``"bf16-encoder"``, ``"int8-encoder"``, ``"int8-all"``; a
spec may also name ``"auto"`` or ``"fp32"``, which ``streaming.precision.resolve_precision`` resolves on the machine
that runs the recognizer (as it does a bf16 name on a CPU without native bf16).

Whisper's ``Linear`` subclasses ``nn.Linear`` (it casts the weight to the input's dtype), so ``quantize_dynamic``'s
type-keyed module mapping would silently skip it: each layer is copied into a plain ``nn.Linear`` first.
Convolutions, layer norms, embeddings and the vocabulary projection (``CachedTextDecoder(int8_vocab=...)``) stay
as they are.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from streaming.precision import PRECISIONS, REQUESTS, resolve_precision

SCOPES = ("encoder", "all")


class BF16Linear(nn.Module):
    """``F.linear`` in bfloat16 between fp32 activations: the input is cast down, the output back up, so layer norms,
    attention softmax, caches and logits stay fp32."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("weight", linear.weight.detach().to(torch.bfloat16))
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x.to(torch.bfloat16), self.weight, self.bias).to(x.dtype)


def _linears(model: nn.Module, scope: str):
    """(parent, name, Linear) of the encoder's or of every part's Linear layers; refuses unmerged LoRA."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
    if any("lora_" in n for n, _ in model.named_parameters()):
        raise ValueError("merge the LoRA adapter before lowering the precision (training.lora.merge_adapter)")
    parts = [model.encoder] if scope == "encoder" else [model.encoder, model.decoder]
    return [(parent, name, child) for part in parts for parent in list(part.modules())
            for name, child in list(parent.named_children()) if isinstance(child, nn.Linear)]


def bf16_linears(model: nn.Module, scope: str = "all") -> int:
    """Replace the Linear layers of the encoder (``scope="encoder"``) or of encoder and decoder (``"all"``) by
    ``BF16Linear``, in place; returns how many. Inference only, like ``quantize_linears``."""
    found = _linears(model, scope)
    for parent, name, child in found:
        setattr(parent, name, BF16Linear(child))
    return len(found)


def lower_precision(model: nn.Module, precision: str | None) -> int:
    """Apply one of ``PRECISIONS`` ("<dtype>-<scope>") in place; returns how many Linear layers it replaced.
    ``"auto"`` is resolved on this machine first; ``"fp32"`` (or None) replaces none. A name of ``PRECISIONS`` is
    applied as named, bf16 on any CPU (fidelity measurements need it): loaders that serve or evaluate a spec
    resolve it first (``training.causal.evaluate.load_tuned``), which is where a bf16 name becomes a preference."""
    if precision is not None and precision not in REQUESTS:
        raise ValueError(f"precision must be one of {REQUESTS} or None (fp32), got {precision!r}")
    if precision == "auto":
        precision = resolve_precision(precision).effective
    if precision in (None, "fp32"):
        return 0
    dtype, scope = precision.split("-")
    return bf16_linears(model, scope) if dtype == "bf16" else quantize_linears(model, scope)


def quantize_linears(model: nn.Module, scope: str = "encoder", per_channel: bool = True) -> int:
    """Replace the Linear layers of a Whisper model's encoder (``scope="encoder"``) or of encoder and decoder
    (``"all"``) by int8 dynamically quantized ones, in place; returns how many.

    The model can no longer be trained, have adapters merged, or be saved as float weights: quantize a copy
    loaded for inference (``training.causal.evaluate.load_tuned(..., precision="int8-encoder")``)."""
    found = _linears(model, scope)
    qconfig = (torch.ao.quantization.per_channel_dynamic_qconfig if per_channel
               else torch.ao.quantization.default_dynamic_qconfig)
    with warnings.catch_warnings():
        # torch announces the eager-mode API's move to torchao; it still works and torchao is not a dependency
        warnings.filterwarnings("ignore", category=UserWarning, message=r"(?s).*quantiz")
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r"(?s).*quantiz")
        for parent, name, child in found:
            plain = nn.Linear(child.in_features, child.out_features, bias=child.bias is not None)
            plain.load_state_dict({k: v.float() for k, v in child.state_dict().items()})
            plain.qconfig = qconfig
            setattr(parent, name, torch.ao.nn.quantized.dynamic.Linear.from_float(plain))
    return len(found)


__all__ = ["BF16Linear", "PRECISIONS", "REQUESTS", "SCOPES", "bf16_linears", "lower_precision", "quantize_linears",
           "resolve_precision"]
