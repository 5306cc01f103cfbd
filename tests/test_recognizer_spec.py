"""The recognizer spec (recognizer.spec): small option groups whose defaults are the adopted values, one served spec
file that the pipeline, the registry and the benchmarks read, and a schema version: a version registered under the
old flat schema builds the same recognizer or is refused, naming its schema."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from recognizer.artifact import from_portable, portable
from recognizer.spec import (FOLDERS, SCHEMA_VERSION, CausalPass, RecognizerSpec, SchemaError, SecondPass, Weights,
                             from_dict, load)

# the served two-pass spec as `make run` registered it under schema 1 (the flat SystemSpec of 40 fields; the
# newcomer registry's champion v5): portable, its adapter an artifact name
SCHEMA_1_SERVED = {
    "name": "recognizer two-pass self-agreement zeros_5s 300 ms", "kind": "two-pass", "chunk_ms": 300,
    "model": "tiny.en", "adapter_dir": "artifact:adapter", "t_emma": 0.3, "pad_silence": False,
    "cache_policy": "reuse", "restart_words": 0, "merge_adapter": True, "precision": "auto", "verifier": "zeros_5s",
    "final_verifier": "pad30_features", "self_agreement": True, "window_ms": 8000, "verifier_restart_words": 2,
    "verifier_restart_distinct": 2, "verifier_restart_whole": True, "verifier_restart_long": 4,
    "partials": "verifier-fresh", "partial_min_prob": 0.3, "heartbeat_ms": 600, "hold_last_edge_ms": 300}


def test_a_spec_has_few_top_level_fields_and_no_none_that_means_a_default():
    assert len(fields(RecognizerSpec)) <= 20
    for group in (f for f in fields(RecognizerSpec) if f.name not in ("name", "kind", "chunk_ms", "schema")):
        for option in fields(group.default):
            default = getattr(group.default, option.name)
            # None only where it names no folder (the original weights, the stability rule, no hush word)
            assert default is not None or (group.name, option.name) in FOLDERS, (group.name, option.name)


def test_the_served_file_is_the_adopted_two_pass_spec():
    served = load()
    assert served.schema == SCHEMA_VERSION and served.kind == "two-pass" and served.chunk_ms == 300
    # every verifier default is the served value but the padding: a hush word shipped in configs/, with the hashes
    # of its training audio (the leakage guard checks it without its datasets)
    hush = (Path(__file__).resolve().parent.parent / "configs" / "hush_words" / "tiny.en").resolve()
    assert served.second_pass == SecondPass(padding="hush", hush_dir=str(hush))
    assert (hush / "hush_word.npy").is_file() and (hush / "training_audio.json.gz").is_file()
    assert served.causal == CausalPass(cache_policy="reuse", restart_words=0)  # the two-pass causal pass's own
    assert served.weights == Weights(precision="auto")
    assert load(weights={"adapter_dir": "/a"}).weights.adapter_dir == "/a"  # overrides over the file


def test_the_causal_defaults_are_the_engines():
    """recognizer.spec does not import the engine (torch): its restart cut default is a copy, kept equal."""
    from streaming.engine import RESTART_WORDS

    assert CausalPass().restart_words == RESTART_WORDS


def test_a_schema_1_registration_reads_as_the_same_recognizer():
    spec = from_portable(SCHEMA_1_SERVED, {"adapter": "/models/adapter"})
    served = load()
    # the served spec of its day: every field as served now but the partials' threshold, the verifier's padding and
    # the edge rule, changed later (docs/decisions/partials-l2.md, verifier-hush-clean.md, finals-edge-streams.md)
    assert spec.second_pass.partial_min_prob == 0.3
    assert spec.with_(name=served.name) == served.with_(weights={"adapter_dir": "/models/adapter"},
                                                        second_pass={"partial_min_prob": 0.3, "padding": "zeros_5s",
                                                                     "hush_dir": None, "hold_last_edge_ms": 300})
    # and schema 1's None, which meant the engine's default then, reads as that default
    bare = from_dict({"name": "t", "kind": "two-pass", "chunk_ms": 1000, "verifier": "pad30"})
    assert bare.causal == CausalPass("exact", 3) and bare.weights.precision == "fp32"
    assert (bare.second_pass.final_padding, bare.second_pass.every_ms, bare.second_pass.window_ms) == (
        "pad30", 1000, 0)
    assert (bare.second_pass.self_agreement, bare.second_pass.partials, bare.second_pass.heartbeat_ms) == (
        False, "causal", 0)


@pytest.mark.parametrize("option", [{"pad_silence": True}, {"stall_ms": 900}, {"n_check": 8},
                                    {"restart_context": 224}, {"partials": "verifier-held"},
                                    {"final_min_prob": 0.5}])
def test_a_schema_1_spec_with_a_removed_option_is_refused_naming_its_schema(option):
    with pytest.raises(SchemaError, match="schema 1"):
        from_portable({**SCHEMA_1_SERVED, **option}, {"adapter": "/a"})


def test_unknown_schemas_and_fields_are_refused():
    values = load().as_dict()
    with pytest.raises(SchemaError, match="schema 3"):
        from_dict({**values, "schema": 3})
    with pytest.raises(SchemaError, match="colour"):
        from_dict({**values, "colour": "red"})
    with pytest.raises(SchemaError, match="second_pass"):
        from_dict({**values, "second_pass": {"every": 300}})


def test_a_spec_round_trips_through_its_portable_form(tmp_path):
    spec = load(weights={"adapter_dir": str(tmp_path)}, second_pass={"padding": "hush", "hush_dir": str(tmp_path)})
    values, artifacts = portable(spec)
    assert values["weights"]["adapter_dir"] == "artifact:adapter" and values["schema"] == SCHEMA_VERSION
    assert set(artifacts) == {"adapter", "hush_word"}
    assert from_portable(values, artifacts).with_(weights={"adapter_dir": str(tmp_path)},
                                                  second_pass={"hush_dir": str(tmp_path)}) == spec
