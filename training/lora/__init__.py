"""LoRA (peft) on Whisper's attention projections."""

from training.lora.adapter import (AdapterError, adapted_modules, adapter_state_dict, apply_lora, load_adapter,
                                   merge_adapter, read_adapter_meta, save_adapter, trainable_parameters)

__all__ = ["AdapterError", "adapted_modules", "adapter_state_dict", "apply_lora", "load_adapter", "merge_adapter",
           "read_adapter_meta", "save_adapter", "trainable_parameters"]
