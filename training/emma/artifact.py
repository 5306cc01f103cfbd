"""A trained EMMA policy on disk: ``policy.safetensors`` (the p_choose layers, plus the decoder's cross-attention
value projections for variant pchoose_value) and ``policy.json`` (config, hashes, metrics).

The base weights and the causal LoRA adapter are referenced, never embedded: base by model name + sha256, the
adapter by path + sha256 of its weights; loading refuses a mismatch of either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from configs.emma import EmmaConfig
from data import fs
from data.store import file_sha256
from data.utterances import dataset_ref
from data.weights import checkpoint_sha256
from training.causal.evaluate import load_tuned
from training.emma.p_choose import EmmaPolicy
from training.lora import read_adapter_meta

WEIGHTS, META = "policy.safetensors", "policy.json"
VALUE_PREFIX = "decoder_value."


class PolicyError(ValueError):
    """A policy directory is incomplete or does not fit its base model / adapter."""


def value_parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    """The decoder cross-attention value projections' parameters (base Linear and any LoRA on it)."""
    return {n: p for n, p in model.named_parameters() if n.startswith("decoder.") and ".cross_attn.value." in n}


def save_policy(directory: str | Path, policy: EmmaPolicy, model: nn.Module, cfg: EmmaConfig,
                meta: dict[str, Any]) -> Path:
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in policy.state_dict().items()}
    if cfg.variant == "pchoose_value":
        state.update({VALUE_PREFIX + n: p.detach().cpu().contiguous() for n, p in value_parameters(model).items()})
    tmp = out / (WEIGHTS + ".tmp")
    save_file(state, str(tmp))
    tmp.replace(out / WEIGHTS)
    record = {**meta, "config": cfg.model_dump(mode="json"), "config_hash": cfg.config_hash(),
              "adapter_sha256": cfg.adapter_sha256(), **training_provenance(cfg)}
    (out / META).write_text(json.dumps(record, indent=2, sort_keys=True))
    return out


def training_provenance(cfg: EmmaConfig) -> dict[str, Any]:
    """What the policy trained on (dataset versions + splits) and, on a causal LoRA adapter, what that adapter
    trained on: the policy was shaped by both. Read by the evaluation's leakage guard (``data.provenance``)."""
    out: dict[str, Any] = {"datasets": [dataset_ref(fs.absolute(d)) for d in cfg.datasets],
                           "train_splits": list(cfg.splits)}
    if cfg.encoder == "causal_lora" and cfg.adapter_dir:
        adapter = read_adapter_meta(cfg.adapter_dir)
        out["adapter_provenance"] = {k: adapter[k] for k in ("datasets", "train_splits") if k in adapter}
    return out


def read_policy_meta(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / META
    if not path.exists() or not (Path(directory) / WEIGHTS).exists():
        raise PolicyError(f"{directory}: not a trained EMMA policy ({META} / {WEIGHTS} missing)")
    return json.loads(path.read_text())


def load_policy(directory: str | Path, adapter_dir: str | None = None) -> tuple[nn.Module, EmmaPolicy, dict]:
    """(base model [+ adapter] with the policy's value projections, the policy, its metadata), in eval mode.

    ``adapter_dir`` overrides the recorded adapter path (e.g. a copy in MLflow); its sha256 must match."""
    meta = read_policy_meta(directory)
    cfg = EmmaConfig.model_validate(meta["config"])
    if meta.get("base_sha256") and meta["base_sha256"] != checkpoint_sha256(cfg.model):
        raise PolicyError(f"{directory}: trained on base weights {meta['base_sha256'][:12]}, not this {cfg.model}")
    adapter = adapter_dir or cfg.adapter_dir
    if cfg.encoder == "causal_lora":
        if not adapter or file_sha256(Path(adapter) / "adapter_model.safetensors") != meta["adapter_sha256"]:
            raise PolicyError(f"{directory}: needs the causal LoRA adapter with sha256 {meta['adapter_sha256'][:12]}")
    model = load_tuned(cfg.model, adapter if cfg.encoder == "causal_lora" else None)
    policy = EmmaPolicy.for_model(model, cfg.p_choose)
    state = load_file(str(Path(directory) / WEIGHTS))
    values = {k.removeprefix(VALUE_PREFIX): v for k, v in state.items() if k.startswith(VALUE_PREFIX)}
    policy.load_state_dict({k: v for k, v in state.items() if not k.startswith(VALUE_PREFIX)}, strict=True)
    if values:
        params = value_parameters(model)
        if set(values) != set(params):
            raise PolicyError(f"{directory}: value projections do not fit the model: {sorted(set(values) ^ set(params))[:4]}")
        with torch.no_grad():
            for name, tensor in values.items():
                params[name].copy_(tensor)
    return model.eval(), policy.eval(), meta
