"""Typed configuration of a causal LoRA fine-tuning run (WhisperRT / CarelessWhisper, paper section VI).

Every value that changes the trained adapter lives here once. Its canonical JSON (sorted keys, without the
run-time fields in ``RUNTIME_FIELDS``) is hashed into ``config_hash``: the key of the Ray Train run name, of the
Prefect cache and of the MLflow run, so a retried or resumed run finds its own checkpoints.
"""

from __future__ import annotations

from collections.abc import Sequence

from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from configs.jobs import JobConfig

# Paper / public scripts: f̂ per chunk size (base/small); τ0 = 600 ms for every released chunk size.
PAPER_SAMPLE_FRACTION = {40: 0.02, 100: 0.05, 200: 0.1, 300: 0.25}
PAPER_TAU0_MS = 600

def default_tau0_ms(chunk_ms: int) -> int:
    """The first block: 600 ms as in the paper, or one chunk when chunks are longer (τ0 ≥ τ)."""
    return max(PAPER_TAU0_MS, chunk_ms)


class LoraSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    r: int = Field(32, ge=1, description="LoRA rank (paper: 32 for base/small, 4 for large-v2)")
    alpha: float = Field(32.0, gt=0, description="scale = alpha / r (paper: alpha = r)")
    dropout: float = Field(0.0, ge=0, lt=1)
    # encoder self-attention + decoder self- and cross-attention, query/key/value/out (not MLPs, convs, norms)
    targets: tuple[Literal["encoder.attn", "decoder.attn", "decoder.cross_attn"], ...] = (
        "encoder.attn", "decoder.attn", "decoder.cross_attn")
    projections: tuple[Literal["query", "key", "value", "out"], ...] = ("query", "key", "value", "out")
    # "peft": peft's default (A ~ kaiming(a=√5) over fan_in = d, B = 0). "carelesswhisper": A ~ U(±1/√r), the
    # public code's larger init (√(d/r) times peft's) that its lr = 1e-5 was tuned for. B = 0 in both.
    init: Literal["peft", "carelesswhisper"] = "peft"


class AugmentSettings(BaseModel):
    """Training-time audio augmentation (``training.causal.augment``): what real test speech varies in and the
    training clips do not (LJSpeech clips end at the last word, espeak-ng is noise-free). Each utterance of each
    step is augmented with probability ``p`` (0: off); word and token times move with the audio."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    p: float = Field(0.0, ge=0, le=1, description="probability that an utterance is augmented at a step")
    speed: tuple[float, float] = Field((0.9, 1.1), description="speed perturbation factor range (resampling)")
    lead_silence_ms: tuple[int, int] = Field((0, 1500), description="silence prepended (real clips carry 0–2.5 s)")
    gain_db: tuple[float, float] = (-12.0, 6.0)
    snr_db: tuple[float, float] = Field((10.0, 40.0), description="additive coloured noise, over the whole clip")
    reverb_p: float = Field(0.3, ge=0, le=1, description="probability of a synthetic room (exponential decay)")
    rt60_s: tuple[float, float] = (0.15, 0.6)
    @model_validator(mode="after")
    def _ranges(self) -> AugmentSettings:
        for name in ("speed", "lead_silence_ms", "gain_db", "snr_db", "rt60_s"):
            lo, hi = getattr(self, name)
            if lo > hi:
                raise ValueError(f"augment.{name}: {lo} > {hi}")
        if self.speed[0] <= 0 or self.lead_silence_ms[0] < 0 or self.rt60_s[0] <= 0:
            raise ValueError("augment: speed and rt60_s must be > 0, lead_silence_ms ≥ 0")
        return self


class JoinSettings(BaseModel):
    """Joined utterances (``training.causal.join``): with probability ``p`` a training clip is spoken on by 1 to
    ``max_utterances`` - 1 other clips of the pool, ``gap_ms`` of silence apart, as one clip of at most ``max_s``
    of speech. The synthetic training clips last 2-7 s; real speech runs on for up to 25 s, and the block-causal
    adapter never saw those encoder positions or decoder contexts. Word and token times follow each clip."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # on by default (docs/decisions/joined-clips.md); a joined step costs more (longer clips, no log-mel cache)
    p: float = Field(0.5, ge=0, le=1, description="probability that a clip is joined with others (0: off)")
    max_utterances: int = Field(4, ge=2, description="at most this many clips in one joined clip")
    gap_ms: tuple[int, int] = Field((0, 500), description="silence added between two clips (each keeps its own)")
    max_s: float = Field(24.0, gt=0, le=28, description="the joined speech ends by this (augmentation needs room)")

    @model_validator(mode="after")
    def _ranges(self) -> JoinSettings:
        if not 0 <= self.gap_ms[0] <= self.gap_ms[1]:
            raise ValueError(f"join.gap_ms: need 0 <= low <= high, got {self.gap_ms}")
        return self


class DistillSettings(BaseModel):
    """Distillation from the full-context teacher: at every supervised position whose target is a word
    token (not the "wait" EOT), a KL term between the student's next-token distribution (block-causal encoder,
    audio up to the sample point) and the teacher's (the same base weights with the adapter switched off, full
    attention over the whole utterance, same token prefix). The teacher hears the right context the student
    lacks, and its whole distribution teaches, not only the one target token."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # on by default (docs/decisions/distillation.md); each step also runs the teacher's passes
    weight: float = Field(0.5, ge=0, le=1, description="loss = (1 - weight) CE + weight KL; 0: off")
    temperature: float = Field(2.0, gt=0, description="softens both distributions; KL scaled by T^2 (Hinton)")


class ChaosConfig(BaseModel):
    """Fault drill: SIGKILL the worker of ``rank`` when it reaches ``at_step``, once (``marker`` file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rank: int = 1
    at_step: int = Field(..., ge=1)
    marker: str


class FinetuneConfig(JobConfig):
    chunk_ms: int = Field(300, description="chunk size τ (ms, multiple of 20); also the validation chunk size")
    tau0_ms: int | None = Field(None, description="first block τ0 (ms); default max(600, chunk_ms)")
    # random chunk size variant: a chunk size per step, drawn from this set (one adapter for all sizes)
    chunk_ms_choices: tuple[int, ...] | None = None
    sample_fraction: float | None = Field(None, gt=0, le=1, description="f̂; default: the paper's value per chunk")
    margin_ms: int = Field(1000, ge=0, description="sample points up to the speech end plus this (silence)")
    # A learning curve over data size (docs/decisions/data-size.md) trains on nested subsets: each dataset's
    # ceil(fraction·n) utterances whose keys hash lowest (training.causal.data.key_subset), so every seed sees the
    # same subset and a larger fraction adds utterances to a smaller one's instead of swapping them.
    train_fraction: float = Field(1.0, gt=0, le=1, description="share of each training dataset's utterances")
    # a learning curve over one corpus (issue 66: real hours ¼, ½, all beside the whole synthetic corpus)
    dataset_fractions: dict[str, float] = Field(default_factory=dict, description="share of the named training "
                                                "dataset's utterances (its dataset.json name), instead of "
                                                "train_fraction")
    lora: LoraSettings = LoraSettings()
    augment: AugmentSettings = AugmentSettings()
    join: JoinSettings = JoinSettings()
    distill: DistillSettings = DistillSettings()

    val_every: int = Field(0, ge=0, description="streaming validation every N steps (0: at the end only)")

    max_steps: int = Field(200, ge=1)
    batch_size: int = Field(4, ge=1, description="utterances per worker per optimizer step")
    lr: float = Field(1e-3, gt=0)
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    warmup_steps: int = Field(20, ge=0)
    grad_clip: float = Field(1.0, gt=0)
    seed: int = 3407
    checkpoint_every: int = Field(25, ge=1)
    log_every: int = Field(1, ge=1)

    output_dir: str = "outputs/adapters"
    experiment: str = "whisperline-causal"
    chaos: ChaosConfig | None = None

    @field_validator("chunk_ms")
    @classmethod
    def _frames(cls, v: int) -> int:
        if v <= 0 or v % 20:
            raise ValueError(f"chunk_ms must be a positive multiple of 20 ms, got {v}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> FinetuneConfig:
        bad = {k: v for k, v in self.dataset_fractions.items() if not 0 < v <= 1}
        if bad:
            raise ValueError(f"dataset_fractions must be in (0, 1], got {bad}")
        for c in self.chunk_ms_choices or ():
            if c <= 0 or c % 20 or c > self.resolved_tau0_ms:
                raise ValueError(f"chunk_ms_choices: {c} must be a multiple of 20 ms and at most tau0_ms "
                                 f"({self.resolved_tau0_ms})")
        if self.resolved_tau0_ms < self.chunk_ms or self.resolved_tau0_ms % 20:
            raise ValueError(f"tau0_ms ({self.resolved_tau0_ms}) must be a multiple of 20 and >= chunk_ms")
        return self

    @property
    def resolved_tau0_ms(self) -> int:
        if self.tau0_ms is not None:
            return self.tau0_ms
        return max(default_tau0_ms(c) for c in (self.chunk_ms, *(self.chunk_ms_choices or ())))

    def fraction_for(self, chunk_ms: int) -> float:
        if self.sample_fraction is not None:
            return self.sample_fraction
        return PAPER_SAMPLE_FRACTION.get(chunk_ms, 0.25)

    @property
    def variant(self) -> str:
        return "rcs" if self.chunk_ms_choices else f"{self.chunk_ms}ms"

    @property
    def registered_name(self) -> str:
        return f"whisperline-causal-{self.model}-{self.variant}"

    def learned_values(self) -> dict:
        return {**super().learned_values(), "tau0_ms": self.resolved_tau0_ms}

    def for_chunk(self, chunk_ms: int) -> FinetuneConfig:
        """This config at another chunk size (τ0 re-derived unless it was set explicitly)."""
        return FinetuneConfig.model_validate({**self.model_dump(), "chunk_ms": chunk_ms, "chunk_ms_choices": None})

    def for_random_chunks(self, chunk_sizes: Sequence[int]) -> FinetuneConfig:
        """One adapter for the chunk sizes ``chunk_sizes`` up to τ0 = 600 ms (the paper's first block; longer chunks
        would need a longer first block for all sizes), validated at this config's chunk size if it is one of them,
        else at the largest."""
        choices = tuple(sorted({c for c in chunk_sizes if c <= PAPER_TAU0_MS}))
        if not choices:
            raise ValueError(f"random-chunk training needs chunk sizes ≤ {PAPER_TAU0_MS} ms, got {list(chunk_sizes)}")
        return FinetuneConfig.model_validate({**self.model_dump(), "chunk_ms_choices": choices, "tau0_ms": None,
                                              "chunk_ms": self.chunk_ms if self.chunk_ms in choices else choices[-1]})


def load_finetune_config(path: str | None = None, **overrides: object) -> FinetuneConfig:
    """Read the ``finetune:`` section of a YAML profile (or the defaults) and apply keyword overrides."""
    values: dict[str, object] = {}
    if path:
        with open(path, encoding="utf-8") as fh:
            loaded = yaml.safe_load(fh) or {}
        values.update(loaded.get("finetune", {}))
    values.update({k: v for k, v in overrides.items() if v is not None})
    return FinetuneConfig(**values)
