"""The whole pipeline's typed configuration: one YAML profile, every stage's settings, checked before any work.

The ``pipeline:`` section of a profile holds the DAG's own values (corpus size, chunk sizes, stages) and per-stage
overrides on top of the profile's stage sections (``finetune:``, ``emma_sweep:``): the smoke profile runs the
same stages as the cluster profile, shorter. ``validate()`` builds every stage config with placeholder dataset
paths, so an unknown chunk size, τ0 < τ, a negative λ or an unknown model fails before a dataset is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from configs.dataset import BuildRuntime, DatasetConfig
from configs.emma import EmmaConfig, SweepConfig
from configs.finetune import FinetuneConfig
from configs.hush_word import HushWordConfig

SERVED_FILE = Path(__file__).resolve().parent / "recognizer.yaml"

Stage = Literal["build_dataset", "train_hush_word", "finetune_causal", "sweep_emma", "evaluate", "promote"]
ALL_STAGES: tuple[Stage, ...] = ("build_dataset", "train_hush_word", "finetune_causal", "sweep_emma", "evaluate",
                                 "promote")
KNOWN_MODELS = ("tiny.en", "tiny", "base.en", "base", "small.en", "small", "medium.en", "medium", "large-v2",
                "large-v3")
_PENDING = ("<built by the pipeline>",)


class PipelineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "tiny.en"
    n_synth: int = Field(40, ge=1, description="espeak-ng utterances of the embedded corpus")
    chunk_sizes: tuple[int, ...] = (300,)
    sweep_chunk_ms: int = 300
    stages: tuple[Stage, ...] = ALL_STAGES
    output_root: str = "outputs"
    tracking_uri: str | None = None
    num_workers: int = Field(2, ge=1)
    al_budget_ms: float | None = Field(None, gt=0, description="promotion rule; default: the causal run's AL")
    lock_timeout_s: float = Field(6 * 3600, ge=0, description="how long to wait for another pipeline on output_root")
    dataset: DatasetConfig = DatasetConfig()
    build: BuildRuntime = BuildRuntime()  # the profile's `build:` (where the dataset builds run: a Ray address)
    # Real speech (--realspeech): split by speaker where a corpus has several, by utterance where it has one; a
    # large test share, because real speech is what the headline numbers are measured on (train trains, dev
    # selects, test is only reported).
    real_splits: dict[str, float] = Field(default_factory=lambda: {"train": 0.4, "dev": 0.2, "test": 0.4})
    # Real training speech (--real-train, a corpus of many speakers): split by speaker; its dev and test speakers join
    # the dev and test sets (docs/decisions/l2-split.md) ...
    real_train_splits: dict[str, float] = Field(default_factory=lambda: {"train": 0.8, "dev": 0.1, "test": 0.1})
    # ... and how much of its train speakers' speech trains (a fraction of the utterances, nested subsets by key
    # hash; 0: its dev and test speakers only evaluate): all of it, its prompts in written form
    # (docs/decisions/real-speech-written.md)
    real_train_fraction: float = Field(1.0, ge=0.0, le=1.0)
    # The evaluate stage: the real PyPI peers (whisperlivekit) beside ours on the held-out test split, at these
    # chunk sizes (1 s: where they keep up with real time on 2 cores).
    evaluate_peers: bool = True
    evaluate_peer_chunk_ms: tuple[int, ...] = (1000,)
    evaluate_limit: int | None = Field(None, ge=1, description="first N test utterances (smoke runs)")
    # The promote stage: every recognizer the stages made is registered and scored on `dev`; the gate names the
    # champion within the WER cap and this budget (median final-word latency on dev, RTF on this machine)
    champion_budget: dict[Literal["latency_ms", "rtf"], float] = Field(default_factory=dict)
    # ... and names this candidate champion (a part of a name tasks/recognizer.py builds, case-blind) unless another
    # one's dev WER is separably lower (paired 95 % bootstrap interval of the difference wholly below 0;
    # recognizer.gate): the served spec, ``recognizer`` (docs/decisions/default-champion.md). None: the lowest dev WER
    champion_default: str | None = Field("two-pass self-agreement served", min_length=1,
                                         description="default champion: part of a candidate's name (None: off)")
    candidate_beam: int | None = Field(None, ge=2, description="also register causal beam search of this width")
    # the served recognizer spec (recognizer.spec): the two-pass candidates are it over each tuned adapter
    recognizer: str = Field("configs/recognizer.yaml", description="the served recognizer spec (YAML; a relative "
                            "path is read from the repository)")
    # the mid-stream verifier's padding of the two-pass candidates, each registered and left to the dev gate: the
    # served spec's own (its hush word, docs/decisions/verifier-hush-clean.md), the run's hush word (the hush-word
    # stage's product), or a fixed padding
    two_pass_verifiers: tuple[Literal["served", "hush", "zeros_5s", "noise_5s", "pad30"], ...] = ("served", "hush")
    # EMMA among the recognizers the promote stage registers: off, as it did not write earlier than the stability
    # rule at a WER not separably worse (docs/decisions/emma-candidate.md), nor, over the L2-trained adapter, earlier
    # than the served two-pass finals (emma-adopted.md); the sweep still runs, tracks and promotes its own policies
    emma_candidate: bool = False
    hush_word: dict = Field(default_factory=dict)
    finetune: dict = Field(default_factory=dict)
    emma_sweep: dict = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> PipelineConfig:
        if self.model not in KNOWN_MODELS:
            raise ValueError(f"unknown model {self.model!r}; known: {', '.join(KNOWN_MODELS)}")
        if "sweep_emma" in self.stages and self.sweep_chunk_ms not in self.chunk_sizes:
            raise ValueError(f"sweep_chunk_ms {self.sweep_chunk_ms} needs its causal adapter: add it to chunk_sizes")
        self.validate_stages()
        return self

    def recognizer_file(self) -> Path:
        """The served recognizer spec's file (``recognizer``; a relative path is read from the repository)."""
        path = Path(self.recognizer)
        return path if path.is_absolute() else SERVED_FILE.parent.parent / path

    def real_dataset(self) -> DatasetConfig:
        """The build settings of the real speech: the profile's, with the speaker-aware split."""
        return self.dataset.model_copy(update={"name": "realspeech", "split_by": "auto", "splits": self.real_splits})

    def real_train_dataset(self, name: str) -> DatasetConfig:
        """The build settings of the real training speech (``name``: the corpus's, which a finetune section's
        ``dataset_fractions`` names): the profile's, split by speaker, prompts in capitals trained as written text."""
        return self.dataset.model_copy(update={"name": name, "split_by": "speaker", "splits": self.real_train_splits,
                                               "text_form": "written"})

    def _runtime(self) -> dict:
        return {"model": self.model, "tracking_uri": self.tracking_uri, "num_workers": self.num_workers}

    def _under_root(self, **paths: str) -> dict[str, str]:
        """Stage output folders under ``output_root`` (a stage section may still name its own)."""
        return {k: f"{self.output_root}/{v}" for k, v in paths.items()}

    def hush_word_config(self, datasets, validation=()) -> HushWordConfig:
        return HushWordConfig(**{**self._under_root(storage_path="ray", output_dir="hush_words"), **self.hush_word,
                                 **self._runtime(), "datasets": tuple(datasets), "validation_datasets": tuple(validation)})

    def finetune_config(self, datasets, validation=(), fractions: dict[str, float] | None = None) -> FinetuneConfig:
        """``fractions``: a share of a named training dataset's utterances (the real training speech's mix)."""
        extra = {"dataset_fractions": {**self.finetune.get("dataset_fractions", {}), **fractions}} if fractions else {}
        return FinetuneConfig(**{**self._under_root(storage_path="ray", output_dir="adapters"), **self.finetune,
                                 **self._runtime(), "datasets": tuple(datasets), "validation_datasets": tuple(validation),
                                 **extra})

    def sweep_config(self, datasets, validation, adapter_dir: str) -> SweepConfig:
        values = {**self._under_root(policy_store="emma/policies", storage_path="ray-tune"), **self.emma_sweep}
        base = {**self._under_root(output_dir="emma"), **values.pop("base", {}), "model": self.model, "tracking_uri": self.tracking_uri,
                "chunk_ms": self.sweep_chunk_ms, "datasets": tuple(datasets), "validation_datasets": tuple(validation),
                "encoder": "causal_lora", "adapter_dir": adapter_dir}
        return SweepConfig(base=EmmaConfig(**base), al_budget_ms=self.al_budget_ms, **values)

    def validate_stages(self) -> None:
        self.hush_word_config(_PENDING)
        for c in self.chunk_sizes:
            self.finetune_config(_PENDING).for_chunk(c)
        self.sweep_config(_PENDING, _PENDING, "<adapter>")


def load_pipeline_config(path: str | None, **overrides: object) -> PipelineConfig:
    """``pipeline:`` of a profile, with the profile's ``dataset:``/``finetune:``/``emma_sweep:`` sections under
    the pipeline's own overrides of them."""
    values: dict = {}
    if path:
        with open(path, encoding="utf-8") as fh:
            profile = yaml.safe_load(fh) or {}
        values = dict(profile.get("pipeline", {}))
        if "dataset" in profile:
            values["dataset"] = {**profile["dataset"], **values.get("dataset", {})}
        if "build" in profile:
            values["build"] = {**(profile["build"] or {}), **values.get("build", {})}
        for section in ("finetune", "emma_sweep"):
            merged = {**profile.get(section, {}), **values.get(section, {})}
            if section == "emma_sweep":
                merged["base"] = {**profile.get(section, {}).get("base", {}), **values.get(section, {}).get("base", {})}
            values[section] = merged
    values.update({k: v for k, v in overrides.items() if v is not None})
    return PipelineConfig(**values)
