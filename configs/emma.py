"""Typed configuration of EMMA policy training (WhisperEMMA) and of its sweeps.

``EmmaConfig`` is one trained policy plus the inference parameters it is evaluated with. Only what the policy
*learns* is hashed (``config_hash``): the decision threshold ``t_emma`` and ``max_stall`` are inference
parameters, so every threshold of a sweep reuses one trained policy; the causal LoRA adapter enters the hash by
its content (sha256 of its weights), not its path.
"""

from __future__ import annotations

import hashlib

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from configs.finetune import default_tau0_ms
from configs.jobs import JobConfig

INFERENCE_FIELDS = frozenset({"t_emma", "max_stall", "decision", "adapter_dir"})


class PChooseSettings(BaseModel):
    """The p_choose network's shape (SeamlessStreaming dense_1b values, ../shared/research/emma.md §1.1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_energy_layers: int = Field(4, ge=1)
    energy_bias: float = Field(-0.5, description="initial b (negative: start by reading)")
    temperature: float = Field(0.2, gt=0)
    final_relu: bool = Field(True, description="ReLU after the last energy layer (Seamless): energies ≥ 0, but a "
                                               "head whose units are all dead sits at p = sigmoid(b/τ) for good")


class EmmaConfig(JobConfig):
    chunk_ms: int = Field(300, description="streaming chunk size τ (ms) of training features and evaluation")
    tau0_ms: int | None = Field(None, description="first block τ0; default max(600, chunk_ms)")
    encoder: Literal["original", "causal_lora"] = Field(
        "causal_lora", description="frozen encoder under the policy: original weights or + the causal LoRA adapter "
                                   "(both run block-causally, as the streaming engine does)")
    adapter_dir: str | None = Field(None, description="causal LoRA adapter (required for encoder=causal_lora)")
    variant: Literal["pchoose", "pchoose_value"] = Field(
        "pchoose", description="train the p_choose network only, or also the decoder cross-attention value "
                               "projections")
    p_choose: PChooseSettings = PChooseSettings()

    lambda_latency: float = Field(0.05, ge=0, description="per second of expected delay (about 0.05: the "
                                  "NLL cost of a write before its audio is a few nats per token)")
    lambda_variance: float = Field(0.1, ge=0)
    latency_loss: Literal["expected_delay", "dal"] = Field(
        "expected_delay", description="C of L_latency: mean expected delay, or differentiable average lagging "
                                      "(both in seconds)")
    lambda_alignment: float = Field(
        0.0, ge=0, description="whisperline addition: weight of a BCE of p_choose against the forced-alignment "
                               "token ends (0 = EMMA as published)")
    mass_preservation: bool = True
    alignment: Literal["log_scan", "closed_form"] = "log_scan"
    beta_weight_max: float = Field(0.5, ge=0, le=1, description="max weight of βV in the cross-attention")
    beta_ramp_steps: int = Field(10, ge=0, description="β_weight (and the shaping losses) rise linearly over "
                                                                   "these steps")
    margin_ms: int = Field(300, ge=0, description="silence after the speech end (the 'read to the end' frames)")

    max_steps: int = Field(80, ge=1)
    batch_size: int = Field(4, ge=1)
    lr: float = Field(3e-4, gt=0, description="p_choose learning rate")
    value_lr: float = Field(1e-5, gt=0, description="cross-attention value projections (variant pchoose_value)")
    weight_decay: float = 0.01
    warmup_steps: int = Field(10, ge=0)
    grad_clip: float = Field(1.0, gt=0)
    seed: int = 3407
    log_every: int = Field(5, ge=1)

    t_emma: float = Field(0.3, gt=0, lt=1, description="write while min p_choose at the frontier ≥ t_emma")
    max_stall: int = Field(3, ge=0, description="consecutive read decisions before a write is forced")
    decision: Literal["min", "mean"] = Field(
        "min", description="p at the frontier over layers and heads: min (Seamless, the paper) or mean (WhisperEMMA's "
                           "evaluation; less strict while some heads are untrained)")

    output_dir: str = "outputs/emma"
    experiment: str = "whisperline-emma"

    @model_validator(mode="after")
    def _consistent(self) -> EmmaConfig:
        if self.chunk_ms <= 0 or self.chunk_ms % 20:
            raise ValueError(f"chunk_ms must be a positive multiple of 20 ms, got {self.chunk_ms}")
        if self.encoder == "causal_lora" and not self.adapter_dir:
            raise ValueError("encoder=causal_lora needs adapter_dir (a causal LoRA adapter of this chunk size)")
        return self

    @property
    def resolved_tau0_ms(self) -> int:
        return self.tau0_ms if self.tau0_ms is not None else default_tau0_ms(self.chunk_ms)

    def adapter_sha256(self) -> str | None:
        if self.encoder != "causal_lora" or not self.adapter_dir:
            return None
        return hashlib.sha256((Path(self.adapter_dir) / "adapter_model.safetensors").read_bytes()).hexdigest()

    def learned_values(self) -> dict:
        values = {k: v for k, v in super().learned_values().items() if k not in INFERENCE_FIELDS}
        return {**values, "tau0_ms": self.resolved_tau0_ms, "adapter_sha256": self.adapter_sha256()}

    def resolved_paths(self) -> EmmaConfig:
        cfg = super().resolved_paths()
        if cfg.adapter_dir:
            cfg = cfg.model_copy(update={"adapter_dir": str(Path(cfg.adapter_dir).resolve())})
        return cfg

    @property
    def registered_name(self) -> str:
        return f"whisperline-emma-{self.model}-{self.chunk_ms}ms"


class SweepConfig(BaseModel):
    """A grid over thresholds and loss weights (and chunk sizes), run as Ray Tune trials."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: EmmaConfig
    t_emma: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5)
    lambda_latency: tuple[float, ...] = (0.01, 0.05)
    lambda_variance: tuple[float, ...] = (0.0, 0.1)
    chunk_ms: tuple[int, ...] = ()  # () = the base config's chunk size only
    adapters: dict[int, str] = Field(default_factory=dict, description="causal LoRA adapter per chunk size")
    cpus_per_trial: float = Field(1, gt=0)
    max_concurrent_trials: int | None = Field(None, ge=1, description="default: the cluster's CPUs / cpus_per_trial")
    asha: bool = Field(False, description="ASHA early stopping on the training loss (trainings that lag are cut)")
    asha_grace_period: int = Field(2, ge=1, description="reports (every log_every steps) before ASHA may stop")
    policy_store: str = "outputs/emma/policies"
    storage_path: str = "outputs/ray-tune"
    al_budget_ms: float | None = Field(None, gt=0, description="promotion rule: lowest WER with AL within budget")
    experiment: str = "whisperline-emma-sweep"

    def trial_configs(self) -> list[EmmaConfig]:
        """Every trial's config, ordered so that consecutive trials train different policies (concurrent trials
        never wait on the same training) and thresholds of a trained policy follow."""
        chunks = self.chunk_ms or (self.base.chunk_ms,)
        keys = [(c, lat, var) for c in chunks for lat in self.lambda_latency for var in self.lambda_variance]
        out = []
        for t in self.t_emma:
            for c, lat, var in keys:
                update: dict = {"chunk_ms": c, "lambda_latency": lat, "lambda_variance": var, "t_emma": t}
                if c in self.adapters:
                    update["adapter_dir"] = self.adapters[c]
                out.append(EmmaConfig.model_validate({**self.base.model_dump(), **update}))
        return out


def load_sweep_config(path: str | None, base_overrides: dict, **overrides: object) -> SweepConfig:
    """The ``emma_sweep:`` section of a YAML profile (or the defaults), with overrides applied (None = keep)."""
    values: dict = {}
    if path:
        with open(path, encoding="utf-8") as fh:
            values = dict((yaml.safe_load(fh) or {}).get("emma_sweep", {}))
    base = {**values.pop("base", {}), **{k: v for k, v in base_overrides.items() if v is not None}}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return SweepConfig(base=EmmaConfig(**base).resolved_paths(), **values)
