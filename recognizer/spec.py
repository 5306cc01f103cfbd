"""What a recognizer is, as data: a frozen :class:`RecognizerSpec` composed of small option groups, each group's
defaults the values its dev decision adopted (``docs/decisions/``), so a field left out means the adopted value and
never "whatever the engine does". ``recognizer.build.build`` turns a spec into a running recognizer; the served spec
is the file ``configs/recognizer.yaml``.

A spec carries its schema version. Version 1 was the flat ``SystemSpec`` of 40 fields, where ``None`` meant the
engine's default: :func:`from_dict` reads it into the groups with what ``None`` meant then, so a version registered
under it builds the same recognizer, and refuses, naming the schema, a spec that set an option since removed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from configs.pipeline import SERVED_FILE  # the served spec's file (named in one place)
from streaming.segmented import MAX_SEGMENT_MS, SEGMENT_MS  # numpy only: reading a spec loads no torch

SCHEMA_VERSION = 2

Kind = Literal["offline", "faster-whisper", "causal", "two-pass", "whisperlivekit-la", "whisperlivekit-simul"]
OURS: tuple[str, ...] = ("causal", "two-pass")
Precision = Literal["auto", "fp32", "bf16-all", "bf16-encoder", "int8-encoder", "int8-all"]
Padding = Literal["hush", "zeros_5s", "noise_5s", "pad30"]


class SchemaError(ValueError):
    """A spec this code cannot build as it was meant: an unknown schema, field or a removed option."""


@dataclass(frozen=True)
class Weights:
    """The base model, the adapter on it and the precision of its Linear layers (``streaming.precision``)."""

    model: str = "tiny.en"
    adapter_dir: str | None = None  # a LoRA adapter folder; None: the original weights
    merge_adapter: bool = True  # folded into the weights (False: peft's LoRA layers at every step)
    precision: Precision = "fp32"  # "auto": bf16 where native, else int8 on the encoder (docs/decisions)


@dataclass(frozen=True)
class CausalPass:
    """The block-causal engine (CarelessWhisper): its decoder cache and greedy decoding's restart cut."""

    cache_policy: Literal["exact", "reuse"] = "exact"
    restart_words: int = 3  # cut an open restart of this many words (0: off; streaming.engine.RESTART_WORDS)


@dataclass(frozen=True)
class Decoding:
    """The causal recognizer's write policy: the stability rule (greedy or beam) or an EMMA policy."""

    beam_size: int = 1
    emma_dir: str | None = None  # an EMMA policy folder; None: the stability rule
    t_emma: float = 0.3


@dataclass(frozen=True)
class SecondPass:
    """The two-pass verifier (``streaming.second_pass``): the original weights over the audio ⊕ a padding."""

    padding: Padding = "zeros_5s"  # mid-stream passes; "hush" (the served spec's) needs hush_dir
    hush_dir: str | None = None
    final_padding: Padding | Literal["pad30_features"] = "pad30_features"  # the end-of-stream pass
    every_ms: int = 300
    self_agreement: bool = True  # also finalise what two consecutive passes agree on
    window_ms: int = 8000  # past this much audio, final words leave the window (0: the whole segment)
    restart_words: int = 2  # a pass finalises nothing from a run of this many words said again (0: off)
    restart_distinct: int = 2  # ... of this many different words
    restart_whole: bool = True  # ... that says again all that followed it
    restart_long: int = 4  # ... or runs this many words (0: no such length)
    partials: Literal["causal", "verifier-fresh"] = "verifier-fresh"
    partial_min_prob: float = 0.7  # partials end before an unsure verifier word (0: off)
    heartbeat_ms: int = 600  # a pass at least this often over non-quiet audio (0: only when the causal tail moves)
    hold_last_edge_ms: int = 0  # >0: the last word is final once it ends this far before the edge (0: always held)


@dataclass(frozen=True)
class Segmentation:
    """Streams of any length as Whisper-sized segments (``streaming.segmented``)."""

    segment_ms: int = SEGMENT_MS
    max_segment_ms: int = MAX_SEGMENT_MS


@dataclass(frozen=True)
class Peer:
    """The whisperlivekit peers' own options (kept so that comparisons are fair)."""

    vac: bool = False  # its voice-activity controller in front


@dataclass(frozen=True)
class RecognizerSpec:
    name: str
    kind: Kind = "two-pass"
    chunk_ms: int | None = 300  # None: offline (the whole utterance at once)
    weights: Weights = Weights()
    causal: CausalPass = CausalPass()
    decoding: Decoding = Decoding()
    second_pass: SecondPass = SecondPass()
    segmentation: Segmentation = Segmentation()
    peer: Peer = Peer()
    schema: int = SCHEMA_VERSION

    @property
    def model(self) -> str:
        return self.weights.model

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_(self, **overrides: Any) -> RecognizerSpec:
        """This spec with ``overrides`` set over it: top-level fields, or a group's fields as a dict."""
        return from_dict(_merge(self.as_dict(), overrides))


_GROUP_TYPES = {"weights": Weights, "causal": CausalPass, "decoding": Decoding, "second_pass": SecondPass,
                "segmentation": Segmentation, "peer": Peer}
# the fields that name a folder: (group, field)
FOLDERS = (("weights", "adapter_dir"), ("decoding", "emma_dir"), ("second_pass", "hush_dir"))


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def from_dict(values: dict[str, Any]) -> RecognizerSpec:
    """A spec from its dict (a file, a registered version's JSON): schema 2 as it is, schema 1 converted."""
    schema = values.get("schema", 1)
    if schema == 1:
        return _from_schema_1(values)
    if schema != SCHEMA_VERSION:
        raise SchemaError(f"recognizer spec schema {schema!r} is unknown to this code (it reads schemas 1 and "
                          f"{SCHEMA_VERSION}): {values.get('name')!r}")
    top = {f.name for f in fields(RecognizerSpec)}
    unknown = set(values) - top
    if unknown:
        raise SchemaError(f"recognizer spec (schema {schema}) has unknown fields {sorted(unknown)}")
    kw = dict(values)
    for group, cls in _GROUP_TYPES.items():
        if group in kw and not is_dataclass(kw[group]):
            given = dict(kw[group])
            bad = set(given) - {f.name for f in fields(cls)}
            if bad:
                raise SchemaError(f"recognizer spec (schema {schema}): {group} has unknown fields {sorted(bad)}")
            kw[group] = cls(**given)
    return RecognizerSpec(**kw)


def load(path: str | Path = SERVED_FILE, **overrides: Any) -> RecognizerSpec:
    """A spec file (YAML or JSON), with ``overrides`` over it (:meth:`RecognizerSpec.with_`). A relative folder the
    file names (the served spec's hush word) is read from the file's own directory, wherever the caller runs."""
    values = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    for group, name in FOLDERS:
        section = values.get(group)
        folder = section.get(name) if isinstance(section, dict) else None
        if folder and not Path(folder).is_absolute():
            values[group][name] = str((Path(path).resolve().parent / folder).resolve())
    spec = from_dict(values)
    return spec.with_(**overrides) if overrides else spec


def hush_word_model(hush_dir: str | None) -> str | None:
    """The Whisper model a hush word was trained for (its ``hush_word.json``), or None where it does not say."""
    meta = Path(hush_dir or "") / "hush_word.json"
    if not hush_dir or not meta.is_file():
        return None
    return yaml.safe_load(meta.read_text(encoding="utf-8")).get("base_model")


def served(config=None) -> RecognizerSpec:
    """The served spec: ``configs/recognizer.yaml``, or a pipeline profile's (``PipelineConfig.recognizer``) on
    its model."""
    if config is None:
        return load()
    return load(config.recognizer_file(), weights={"model": config.model})


# ------------------------------------------------------------------------------------------------ schema 1
# Schema 1's options that were removed, with the one value each may hold to build what schema 2 builds.
_REMOVED_V1 = {"pad_silence": (False,), "stall_ms": (None, 0), "stall_restart_words": (None, 0),
               "n_check": (None, 2), "restart_context": (None, 24), "tau0_ms": (None,)}
_V1_FIELDS = {"name", "kind", "chunk_ms", "model", "adapter_dir", "emma_dir", "t_emma", "beam_size", "cache_policy",
              "restart_words", "merge_adapter", "precision", "verifier", "hush_dir", "every_ms", "final_verifier",
              "self_agreement", "window_ms", "verifier_restart_words", "verifier_restart_distinct",
              "verifier_restart_whole", "verifier_restart_long", "partials", "partial_min_prob", "heartbeat_ms",
              "hold_last_edge_ms", "vac", *_REMOVED_V1}


def _from_schema_1(v: dict[str, Any]) -> RecognizerSpec:
    """Schema 1 (flat, ``None``: the engine's default then) as schema 2, or :class:`SchemaError`."""
    name = v.get("name")
    unknown = set(v) - _V1_FIELDS
    if unknown:
        raise SchemaError(f"recognizer spec {name!r} (schema 1) sets options this code no longer has: "
                          f"{sorted(unknown)}; register it again under schema {SCHEMA_VERSION}")
    for key, allowed in _REMOVED_V1.items():
        if v.get(key, allowed[0]) not in allowed:
            raise SchemaError(f"recognizer spec {name!r} (schema 1) sets {key}={v[key]!r}, an option removed in "
                              f"schema {SCHEMA_VERSION} (docs/decisions); it cannot be built as registered")
    if v.get("partials") not in (None, "causal", "verifier-fresh"):
        raise SchemaError(f"recognizer spec {name!r} (schema 1) shows partials {v['partials']!r}, a policy removed "
                          f"in schema {SCHEMA_VERSION}; it cannot be built as registered")

    def got(key: str, default: Any) -> Any:
        return default if v.get(key) is None else v[key]

    padding = got("verifier", "hush")
    return RecognizerSpec(
        name=name, kind=v["kind"], chunk_ms=v.get("chunk_ms"),
        weights=Weights(got("model", "tiny.en"), v.get("adapter_dir"), got("merge_adapter", True),
                        got("precision", "fp32")),
        causal=CausalPass(got("cache_policy", "exact"), got("restart_words", 3)),
        decoding=Decoding(got("beam_size", 1), v.get("emma_dir"), got("t_emma", 0.3)),
        second_pass=SecondPass() if v["kind"] != "two-pass" else SecondPass(  # read only by two-pass
            padding=padding, hush_dir=v.get("hush_dir"), final_padding=got("final_verifier", padding),
            every_ms=got("every_ms", v.get("chunk_ms") or 300), self_agreement=got("self_agreement", False),
            window_ms=got("window_ms", 0), restart_words=got("verifier_restart_words", 0),
            restart_distinct=got("verifier_restart_distinct", 1), restart_whole=got("verifier_restart_whole", False),
            restart_long=got("verifier_restart_long", 0), partials=got("partials", "causal"),
            partial_min_prob=got("partial_min_prob", 0.0), heartbeat_ms=got("heartbeat_ms", 0),
            hold_last_edge_ms=got("hold_last_edge_ms", 0)),
        peer=Peer(got("vac", False)))


def folders(spec: RecognizerSpec) -> dict[tuple[str, str], str]:
    """{(group, field): folder} of the folders ``spec`` names."""
    return {(g, f): getattr(getattr(spec, g), f) for g, f in FOLDERS if getattr(getattr(spec, g), f)}


def artifact_dirs(specs: list[RecognizerSpec]) -> list[str]:
    """Every trained artifact the specs score: adapters, EMMA policies, hush words (each once)."""
    return list(dict.fromkeys(d for s in specs for d in folders(s).values()))


def with_folders(spec: RecognizerSpec, paths: dict[tuple[str, str], str | None]) -> RecognizerSpec:
    """``spec`` with these folder fields set."""
    groups: dict[str, Any] = {}
    for (g, f), path in paths.items():
        groups[g] = replace(groups.get(g, getattr(spec, g)), **{f: path})
    return replace(spec, **groups)


__all__ = ["CausalPass", "Decoding", "FOLDERS", "OURS", "Peer", "RecognizerSpec", "SCHEMA_VERSION", "SERVED_FILE",
           "SchemaError", "SecondPass", "Segmentation", "Weights", "artifact_dirs", "folders", "from_dict",
           "hush_word_model", "load",
           "with_folders"]
