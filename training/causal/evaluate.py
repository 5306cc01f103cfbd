"""Score a base model or a fine-tuned adapter in streaming mode on a set of utterances (same metrics for all)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from configs.finetune import default_tau0_ms
from training.causal.validate import streaming_scores
from evaluation.sets import Utterance


def load_tuned(model_name: str, adapter_dir: str | Path | None, merge: bool = True,
               precision: str | None = None):
    """Base weights (+ the adapter, checked against the base sha256), in eval mode, for inference.

    ``merge``: fold the adapter into the base weights (``training.lora.merge_adapter``): the same arithmetic up
    to float rounding, −20 % compute (tiny.en, 300 ms, benchmarks/results/streaming.md). ``precision``: then
    lower the Linear layers to bfloat16 or int8, of the encoder or of encoder and decoder (``"bf16-all"``,
    ``"int8-encoder"``, ...: ``streaming.quantize.PRECISIONS``; implies ``merge``), as resolved on this machine
    (``streaming.precision.resolve_precision``: ``"auto"``, and a bf16 name where the CPU has no native bf16)."""
    from streaming.precision import resolve_precision
    from training.lora import load_adapter, merge_adapter
    from data.weights import checkpoint_sha256, load_model

    lowering = resolve_precision(precision).lowering  # a bad name fails before any weight is read
    model = load_model(model_name)
    if adapter_dir is not None:
        load_adapter(model, adapter_dir, base_sha256=checkpoint_sha256(model_name))
        if merge or lowering:
            merge_adapter(model)
    if lowering:
        from streaming.quantize import lower_precision

        lower_precision(model, lowering)
    return model.eval()


def evaluate_streaming(model_name: str, adapter_dir: str | Path | None, utterances: Sequence[Utterance],
                       chunk_sizes: Sequence[int], tau0_ms: int | None = None) -> dict[int, dict]:
    """{chunk_ms: scores} of one model (base when ``adapter_dir`` is None) over several chunk sizes."""
    model = load_tuned(model_name, adapter_dir)
    return {c: streaming_scores(model, utterances, c, tau0_ms or default_tau0_ms(c)) for c in chunk_sizes}
