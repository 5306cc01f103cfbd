"""A soup of LoRA adapters: one adapter whose weight update is the mean of several runs' (model soups, Wortsman et
al. 2022, over the training seeds of one recipe).

Why: the causal recipe's dev WER moves by 4-13 points between training seeds alone (``selection/gpu_screen.md``,
``dev_lora_targets*``), as much as any recipe choice did. Averaging the runs' weight updates keeps what they share
and shrinks what each seed drew alone, at no cost when streaming: the served model folds the adapter into the base
weights (``merge_adapter``), so a soup runs exactly as fast as one adapter.

Independent LoRA runs start from different random A matrices, so averaging the A and B matrices themselves would
mix unrelated bases. The mean of the updates, ``mean_i(s · B_i A_i)``, is itself a LoRA whose rank is the sum of
theirs: A is the runs' A matrices stacked, B their B matrices side by side, each divided by ``n``, and alpha is
scaled with the rank so that ``s = alpha / r`` stays the same. The soup is written in the adapters' own format and
loads, merges, registers and serves as any adapter does. (peft's ``add_weighted_adapter(combination_type="cat")``
builds the same matrices, but only on a ``PeftModel``; our adapters are injected into a plain ``Whisper``.)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from configs.finetune import LoraSettings
from training.lora.adapter import ADAPTER_META, AdapterError, lora_config, read_adapter_meta

WEIGHTS = "adapter_model.safetensors"
# what must agree for the runs' updates to be averaged: the same base weights, the same streaming configuration
SAME = ("base_model", "base_sha256", "chunk_ms", "tau0_ms", "chunk_ms_choices", "train_splits")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def soup_tensors(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The stacked LoRA tensors of the mean update of ``states`` (peft state dicts of equal keys)."""
    n = len(states)
    out = {}
    for key in states[0]:
        if ".lora_A." in key:
            out[key] = torch.cat([s[key] for s in states], dim=0)  # [n·r, in]
        elif ".lora_B." in key:
            out[key] = torch.cat([s[key] / n for s in states], dim=1)  # [out, n·r]
        else:
            raise AdapterError(f"{key}: not a LoRA A or B matrix (a soup averages LoRA updates only)")
    return out


def soup_adapters(directories: list[str | Path], out_dir: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """Write the soup of the adapters in ``directories`` (≥ 2; the same base weights, streaming configuration,
    training splits and LoRA settings, the rank aside) to ``out_dir``; returns it. Its metadata names every
    ingredient (directory, run key, sha256 of its weights) and the union of their training datasets (the
    evaluation's leakage guard reads them); ``meta`` adds or overrides entries."""
    from safetensors.torch import load_file, save_file

    dirs = [Path(d) for d in directories]
    if len(dirs) < 2:
        raise AdapterError(f"a soup needs at least 2 adapters, got {len(dirs)}")
    metas = [read_adapter_meta(d) for d in dirs]
    for field in SAME:
        values = {json.dumps(m.get(field), sort_keys=True) for m in metas}
        if len(values) > 1:
            raise AdapterError(f"adapters differ in {field} ({sorted(values)}): their updates cannot be averaged")
    settings = [LoraSettings.model_validate(m["lora"]) for m in metas]
    scale = {s.alpha / s.r for s in settings}
    if len({s.model_copy(update={"r": 1, "alpha": 1.0}) for s in settings}) > 1 or len(scale) > 1:
        raise AdapterError("adapters differ in their LoRA settings (targets, projections, init, dropout or alpha / r)")
    states = [load_file(str(d / WEIGHTS)) for d in dirs]
    if len({tuple(sorted(s)) for s in states}) > 1:
        raise AdapterError("adapters adapt different modules")
    rank = sum(s.r for s in settings)  # the ranks may differ: the stacked update keeps each run's scale alpha / r
    soup_settings = settings[0].model_copy(update={"r": rank, "alpha": scale.pop() * rank})
    tensors = soup_tensors(states)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lora_config(soup_settings).save_pretrained(str(out))
    save_file(tensors, str(out / WEIGHTS))
    ingredients = [{"adapter_dir": str(d), "run_key": m.get("run_key"), "weights_sha256": file_sha256(d / WEIGHTS)}
                   for d, m in zip(dirs, metas)]
    datasets, seen = [], set()
    for m in metas:
        for ref in m.get("datasets", []):
            key = json.dumps(ref, sort_keys=True)
            if key not in seen:
                seen.add(key)
                datasets.append(ref)
    full = {**{k: metas[0].get(k) for k in SAME}, "datasets": datasets, "soup_of": ingredients,
            "run_key": hashlib.sha256("".join(i["weights_sha256"] for i in ingredients).encode()).hexdigest(),
            "lora": soup_settings.model_dump(mode="json"), **(meta or {})}
    (out / ADAPTER_META).write_text(json.dumps(full, indent=2, sort_keys=True))
    return out
