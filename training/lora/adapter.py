"""LoRA adapters (peft) on openai-whisper's attention projections: inject, save, load strictly.

peft injects its ``lora.Linear`` wrappers in place of the ``query``/``key``/``value``/``out`` Linear modules of
``whisper.model.MultiHeadAttention`` (``inject_adapter_in_model``: the model stays a plain ``Whisper``). Our causal
encoder and cached text decoder call those modules directly, so the adapters take part in training and streaming.

On disk an adapter is peft's own format (``adapter_config.json`` + ``adapter_model.safetensors``) plus
``whisperline_adapter.json``, which names the base weights (model name + sha256 of the converted checkpoint) and
the streaming configuration; base weights are never copied into an adapter.

peft is imported inside the functions that use it: it pulls in transformers (seconds), which importing this module
(to read an adapter's metadata, say) must not cost.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from configs.finetune import LoraSettings

ADAPTER_META = "whisperline_adapter.json"
ADAPTER_NAME = "default"


class AdapterError(ValueError):
    """An adapter does not fit the model it is loaded into (wrong base, missing or unexpected keys)."""


def target_regex(settings: LoraSettings) -> str:
    """peft ``target_modules`` regex (full match on module names) for the configured attention projections."""
    parts = []
    for target in settings.targets:
        side, attn = target.split(".")
        parts.append(rf"{side}\.blocks\.\d+\.{attn}")
    return rf"(?:{'|'.join(parts)})\.(?:{'|'.join(settings.projections)})"


def lora_config(settings: LoraSettings):
    from peft import LoraConfig

    return LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                      target_modules=target_regex(settings), bias="none")


def apply_lora(model: nn.Module, settings: LoraSettings, seed: int | None = None) -> list[str]:
    """Inject LoRA into ``model`` (in place), freeze everything else; returns the adapted module names.

    ``seed`` makes the A init reproducible (and equal on every Ray worker before DDP even broadcasts it).
    """
    from peft import inject_adapter_in_model

    if any("lora_" in n for n, _ in model.named_parameters()):
        raise AdapterError("model already has LoRA layers")
    if seed is not None:
        torch.manual_seed(seed)
    inject_adapter_in_model(lora_config(settings), model, adapter_name=ADAPTER_NAME)
    names = adapted_modules(model)
    if not names:
        raise AdapterError(f"no module matched {target_regex(settings)!r}")
    for name, param in model.named_parameters():
        param.requires_grad = "lora_" in name
    if settings.init == "carelesswhisper":
        generator = torch.Generator().manual_seed(seed or 0)
        for module in model.modules():
            if hasattr(module, "lora_A") and ADAPTER_NAME in module.lora_A:
                a = module.lora_A[ADAPTER_NAME].weight  # [r, in]
                bound = 1.0 / math.sqrt(a.shape[0])
                with torch.no_grad():
                    a.copy_(torch.empty(a.shape).uniform_(-bound, bound, generator=generator))
    return names


@contextmanager
def adapters_off(model: nn.Module) -> Iterator[nn.Module]:
    """The base weights alone while inside (a distillation teacher without a second copy of the model).

    peft's own switch (``enable_adapters``) also flips the adapter parameters' ``requires_grad``; the trainable
    flags are put back as they were, so an optimizer or DDP set up before sees the same parameters after."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
    trainable = {name: p.requires_grad for name, p in model.named_parameters()}
    for layer in layers:
        layer.enable_adapters(False)
    try:
        yield model
    finally:
        for layer in layers:
            layer.enable_adapters(True)
        for name, p in model.named_parameters():
            p.requires_grad = trainable[name]


def adapted_modules(model: nn.Module) -> list[str]:
    return [n for n, m in model.named_modules() if hasattr(m, "lora_A") and ADAPTER_NAME in getattr(m, "lora_A")]


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    from peft import get_peft_model_state_dict

    return {k: v.detach().cpu().contiguous() for k, v in get_peft_model_state_dict(model, adapter_name=ADAPTER_NAME).items()}


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for n, p in model.named_parameters() if p.requires_grad]


def save_adapter(model: nn.Module, settings: LoraSettings, directory: str | Path, meta: dict[str, Any]) -> Path:
    """Write the adapter (peft format) and its metadata; returns the directory."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    lora_config(settings).save_pretrained(str(out))
    save_file(adapter_state_dict(model), str(out / "adapter_model.safetensors"))
    full_meta = {**meta, "lora": settings.model_dump(mode="json")}
    (out / ADAPTER_META).write_text(json.dumps(full_meta, indent=2, sort_keys=True))
    return out


def read_adapter_meta(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / ADAPTER_META
    if not path.exists():
        raise AdapterError(f"{directory}: not a whisperline adapter ({ADAPTER_META} missing)")
    return json.loads(path.read_text())


def load_adapter(model: nn.Module, directory: str | Path, *, inject: bool = True,
                 base_sha256: str | None = None) -> dict[str, Any]:
    """Load an adapter into ``model`` strictly: every adapter tensor must land and every LoRA layer be filled.

    ``inject``: add the LoRA layers first (a fresh base model); False: overwrite an already adapted model's
    weights (resume). ``base_sha256``: refuse an adapter trained on other base weights.
    """
    from peft import set_peft_model_state_dict

    directory = Path(directory)
    meta = read_adapter_meta(directory)
    if base_sha256 is not None and meta.get("base_sha256") not in (None, base_sha256):
        raise AdapterError(f"adapter {directory} was trained on base weights {meta.get('base_sha256')}, "
                           f"not {base_sha256}")
    settings = LoraSettings.model_validate(meta["lora"])
    if inject:
        apply_lora(model, settings)
    state = load_file(str(directory / "adapter_model.safetensors"))
    expected = set(adapter_state_dict(model))
    missing, unexpected = expected - set(state), set(state) - expected
    if missing or unexpected:
        raise AdapterError(f"adapter {directory} does not fit: missing {sorted(missing)[:4]}…, "
                           f"unexpected {sorted(unexpected)[:4]}…")
    result = set_peft_model_state_dict(model, state, adapter_name=ADAPTER_NAME)
    if getattr(result, "unexpected_keys", None):
        raise AdapterError(f"peft did not place {result.unexpected_keys[:4]}")
    return meta


def merge_adapter(model: nn.Module) -> int:
    """Fold every LoRA layer into its base Linear (W + B·A·scale) and put the plain Linear back; returns how many.

    For inference only: the adapted model then runs exactly the base model's modules (no extra low-rank matmuls
    and no peft dispatch per projection, a measurable part of a streaming step on CPU), and can no longer be
    trained or saved as an adapter."""
    from peft.tuners.lora import LoraLayer

    merged = 0
    for name, module in list(model.named_modules()):
        if isinstance(module, LoraLayer):
            module.merge(safe_merge=True, adapter_names=[ADAPTER_NAME])
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent), child, module.get_base_layer())
            merged += 1
    return merged
