"""A base model or a fine-tuned adapter loaded for inference: adapter checked and merged, precision lowered."""

from __future__ import annotations

from pathlib import Path

from data.weights import checkpoint_sha256, load_model
from streaming.precision import resolve_precision
from streaming.quantize import lower_precision
from training.lora import load_adapter, merge_adapter


def load_tuned(model_name: str, adapter_dir: str | Path | None, merge: bool = True,
               precision: str | None = None):
    """Base weights (+ the adapter, checked against the base sha256), in eval mode, for inference.

    ``merge``: fold the adapter into the base weights (``training.lora.merge_adapter``): the same arithmetic up
    to float rounding, less compute per step. ``precision``: then lower the Linear layers to bfloat16 or int8, of the
    encoder or of encoder and decoder (``"bf16-all"``, ``"int8-encoder"``, ...: ``streaming.quantize.PRECISIONS``;
    implies ``merge``), as resolved on this machine (``streaming.precision.resolve_precision``: ``"auto"``, and a
    bf16 name where the CPU has no native bf16)."""
    lowering = resolve_precision(precision).lowering  # a bad name fails before any weight is read
    model = load_model(model_name)
    if adapter_dir is not None:
        load_adapter(model, adapter_dir, base_sha256=checkpoint_sha256(model_name))
        if merge or lowering:
            merge_adapter(model)
    if lowering:
        lower_precision(model, lowering)
    return model.eval()
