"""Typed configuration of hush-word training (WhisperFlow §4.1). Hashed like the fine-tuning config."""

from __future__ import annotations

from pydantic import Field, field_validator

from configs.jobs import JobConfig


class HushWordConfig(JobConfig):
    samples: int = Field(8000, description="hush word length in 16 kHz samples (0.5 s); a multiple of 320")
    amplitude_bound: float = Field(0.1, gt=0, le=1.0, description="|h| ≤ bound after every step")
    init_scale: float = Field(1e-3, ge=0, description="initialised uniformly in ±init_scale")
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    # 30: on real speech the validation loss levels off near 30 epochs, and the two-pass verifier is better with
    # the 30-epoch word than with a shorter-trained one
    epochs: int = Field(30, ge=1)
    batch_size: int = Field(8, ge=1, description="utterances per worker per optimizer step (accumulated)")
    average_best: int = Field(3, ge=1, description="final hush word = mean of the best epochs by validation loss")
    seed: int = 0
    # Phrase crops: with this probability an utterance is cut after a random word (between its end and the next
    # word's start) and its target is the tokens said by then: the hush word must stop after any phrase, not only
    # after whole sentences (and streaming buffers end mid-sentence).
    crop_prob: float = Field(0.0, ge=0, le=1)
    eot_weight: float = Field(5.0, gt=0, description="weight of the final EOT in the loss (1 = plain mean)")

    output_dir: str = "outputs/hush_words"
    experiment: str = "whisperline-hushword"

    @field_validator("samples")
    @classmethod
    def _frames(cls, v: int) -> int:
        if v <= 0 or v % 320:
            raise ValueError(f"samples must be a positive multiple of 320 (one encoder frame), got {v}")
        return v

    @property
    def registered_name(self) -> str:
        return f"whisperline-hushword-{self.model}"
