"""Causal (block-masked) LoRA fine-tuning of Whisper for streaming (WhisperRT / CarelessWhisper section VI)."""
