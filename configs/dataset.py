"""Typed configuration of a dataset build. Every value that changes the output lives here once.

The canonical JSON of this model (sorted keys) is hashed into the dataset version id, so two
builds with equal configs and equal inputs are the same dataset.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator


class DatasetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field("whisperline", description="dataset name; the folder under the output root")
    aligner: str = Field("pocketsphinx", description="pocketsphinx | mfa | whisper, or a registered plugin")
    aligner_options: dict[str, str | int | float] = Field(default_factory=dict)
    # Whisper's tokenizer family: tiny.en/base.en use the GPT-2 vocabulary, the rest the multilingual one.
    tokenizer: Literal["english", "multilingual"] = "english"
    audio_format: Literal["flac", "wav"] = "flac"
    shard_size: int = Field(64, ge=1, description="samples per WebDataset shard")
    min_duration_s: float = Field(0.2, ge=0)
    # Whisper sees at most 30 s; longer clips would be truncated silently by pad_or_trim.
    max_duration_s: float = Field(30.0, gt=0, le=30.0)
    # Long-form recordings (meetings, audiobook chapters) with one transcript are aligned whole and cut at aligned
    # pauses into utterances of at most max_duration_s; off, they are rejected (`too_long`).
    long_form: bool = True
    max_recording_s: float = Field(4 * 3600.0, gt=0, description="longest long-form recording accepted")
    # "auto": by speaker within a corpus that has several known speakers, by utterance within a single-speaker
    # corpus (LJSpeech) or one whose speakers are unknown (a speaker split of one speaker holds nothing out).
    split_by: Literal["auto", "speaker", "utterance"] = "auto"
    splits: dict[str, float] = Field(default_factory=lambda: {"train": 0.9, "dev": 0.05, "test": 0.05})
    split_salt: str = "whisperline-v1"
    # "none": each group hashed on its own (stable as the corpus grows); "words": groups dealt so that each split's
    # share of the transcript words matches its fraction (small evaluation corpora, data.splits.assign_balanced)
    split_balance: Literal["none", "words"] = "none"
    # a speaker holding more than this share of all the words is hashed into the splits utterance by utterance
    # (data.splits.share_dominant_groups: one speaker's domain in every split); None: speaker splits stay whole
    dominant_speaker_share: float | None = Field(None, gt=0, lt=1)
    # "written": a transcript wholly in capitals (prompt lists) is stored as a sentence (data.text.written_form), the
    # form Whisper's decoder writes; the others as they are (docs/decisions/real-speech-written.md)
    text_form: Literal["as_is", "written"] = "as_is"
    align_batch_size: int = Field(16, ge=1, description="utterances per align task (Prefect tasks are coarse)")

    @field_validator("splits")
    @classmethod
    def _fractions_sum_to_one(cls, value: dict[str, float]) -> dict[str, float]:
        if not value or any(f < 0 for f in value.values()) or abs(sum(value.values()) - 1.0) > 1e-6:
            raise ValueError(f"split fractions must be >= 0 and sum to 1, got {value}")
        for name in value:
            if not name.isidentifier():
                raise ValueError(f"split name {name!r} must be a plain identifier (it names shard files)")
        return value

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def config_hash(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


def load_dataset_config(path: str | None = None, **overrides: object) -> DatasetConfig:
    """Read a YAML profile (or the defaults) and apply keyword overrides."""
    values: dict[str, object] = {}
    if path:
        with open(path, encoding="utf-8") as fh:
            loaded = yaml.safe_load(fh) or {}
        values.update(loaded.get("dataset", loaded))
    values.update({k: v for k, v in overrides.items() if v is not None})
    return DatasetConfig(**values)


class BuildRuntime(BaseModel):
    """Where a build runs. Not part of the dataset's identity: the same inputs and config give the same bytes on a
    laptop's process pool and on a Ray cluster, so none of this enters the version id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ray_address: str | None = Field(None, description="auto | ray://host:10001 | local; None: a process pool")
    workers: int | None = Field(None, ge=1, description="processes (or Ray actors) for the batches")


def load_build_runtime(path: str | None = None, **overrides: object) -> BuildRuntime:
    """The profile's `build:` section, with keyword overrides (the CLI's flags)."""
    values: dict[str, object] = {}
    if path:
        with open(path, encoding="utf-8") as fh:
            values.update((yaml.safe_load(fh) or {}).get("build") or {})
    values.update({k: v for k, v in overrides.items() if v is not None})
    return BuildRuntime(**values)
