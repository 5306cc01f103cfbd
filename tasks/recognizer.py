"""Prefect tasks of the promote stage over recognizers (flows/pipeline.py wires them): the candidates a profile
trains, each registered as one model version, the dev-split gate, the champion read back for the test report."""

from __future__ import annotations

from dataclasses import replace

from prefect import task
from prefect.cache_policies import NO_CACHE

from configs.pipeline import PipelineConfig
from recognizer.gate import Budget, Default, promote
from recognizer.registry import load_spec, register_recognizer
from recognizer.spec import Decoding, RecognizerSpec, SecondPass, Weights, hush_word_model, served
from tasks.pipeline import dev_selected_emma, hush_candidate, tag_version_test_numbers


@task(name="recognizer-candidates", cache_policy=NO_CACHE)
def recognizer_candidates(config: PipelineConfig, adapters: dict[int, str], sweep: dict | None,
                          hush_dir: str | None) -> list[RecognizerSpec]:
    """Every recognizer the profile's stages made: causal greedy (and beam, ``candidate_beam``) per tuned adapter;
    the served two-pass spec (``config.recognizer``) per adapter and verifier padding of ``two_pass_verifiers`` (its
    own; this run's hush word where one was trained; or a fixed padding), with finals on causal agreement alone or
    also on verifier self-agreement; and the dev-selected EMMA trial at its chunk size where the profile keeps EMMA a
    candidate (``emma_candidate``)."""
    specs: list[RecognizerSpec] = []
    served_spec = served(config)
    paddings = {"served": served_spec, "hush": hush_candidate(served_spec, hush_dir) if hush_dir else None}
    if hush_word_model(served_spec.second_pass.hush_dir) not in (None, config.model):
        paddings["served"] = None  # its hush word is another model's: this run's own stands in (``hush``)
    for chunk, adapter in sorted(adapters.items()):
        weights = Weights(config.model, adapter)
        specs.append(RecognizerSpec(f"recognizer causal {chunk} ms", "causal", chunk, weights))
        if config.candidate_beam and config.candidate_beam > 1:
            specs.append(RecognizerSpec(f"recognizer causal beam {config.candidate_beam} {chunk} ms", "causal", chunk,
                                        weights, decoding=Decoding(beam_size=config.candidate_beam)))
        for verifier in config.two_pass_verifiers:
            base = paddings[verifier] if verifier in paddings else served_spec.with_(
                second_pass={"padding": verifier, "hush_dir": None, "final_padding": SecondPass.final_padding})
            if base is None:
                continue  # no hush word trained in this run, or none for this model
            padding = "" if verifier == "hush" else f" {verifier}"
            for agree in (False, True):  # finals on causal agreement, or also on two verifier passes: dev decides
                specs.append(base.with_(name=f"recognizer two-pass{' self-agreement' if agree else ''}{padding} "
                                             f"{chunk} ms", chunk_ms=chunk, weights={"adapter_dir": adapter},
                                        second_pass={"self_agreement": agree}))
    if config.emma_candidate and (emma := dev_selected_emma(config, adapters, sweep)):
        specs.append(RecognizerSpec(f"recognizer emma {config.sweep_chunk_ms} ms", "causal", config.sweep_chunk_ms,
                                    Weights(config.model, adapters[config.sweep_chunk_ms]), decoding=emma))
    return specs


@task(name="offline-references", cache_policy=NO_CACHE)
def offline_references(config: PipelineConfig) -> list[RecognizerSpec]:
    """The offline systems that set the dev WER cap (the best of them + the cap's points)."""
    specs = [RecognizerSpec("offline Whisper (ours, 30 s pad)", "offline", None, Weights(config.model))]
    if config.evaluate_peers:
        specs.append(RecognizerSpec("faster-whisper offline", "faster-whisper", None, Weights(config.model)))
    return specs


@task(name="register-recognizers", cache_policy=NO_CACHE)
def register_candidates(tracking_uri: str, specs: list[RecognizerSpec]) -> dict[str, dict[str, str]]:
    """{spec name: registration}; a recognizer registered before (same spec, files and code) keeps its version."""
    return {s.name: register_recognizer(tracking_uri, s) for s in specs}


@task(name="promote-recognizers", cache_policy=NO_CACHE)
def promote_recognizers(tracking_uri: str, dev: dict, registered: dict[str, dict[str, str]],
                        config: PipelineConfig) -> dict:
    ts = dev["test_set"]
    eval_set = (f"{','.join(ts.get('splits', ['dev']))}: {ts['n_utterances']} utterances, "
                f"audio {ts.get('audio_sha256', '')[:16]}")
    budget = Budget(config.champion_budget.get("latency_ms"), config.champion_budget.get("rtf"))
    # the dev rows hold the offline references too: the repeated words the gate allows are theirs
    return promote(tracking_uri, dev["systems"], registered, eval_set, budget, Default(config.champion_default))


@task(name="champion-spec", cache_policy=NO_CACHE)
def champion_spec(tracking_uri: str, registered_model: str, alias: str, dst: str) -> RecognizerSpec:
    """The promoted version as the evaluate stage scores it: read back from the registry, like a server does."""
    spec, version = load_spec(tracking_uri, f"models:/{registered_model}@{alias}", dst)
    return replace(spec, name=f"champion (dev-selected): {version['kind']} {spec.chunk_ms} ms "
                              f"v{version['version']}")


@task(name="tag-champion-test-numbers", cache_policy=NO_CACHE)
def tag_champion_test_numbers(tracking_uri: str, champion: dict, evaluation: dict) -> dict[str, str]:
    """The champion was chosen on `dev`; its held-out `test` numbers (reported, never selected on) go onto it."""
    rows = [r for r in evaluation["systems"] if r["name"].startswith("champion (dev-selected)")]
    if not rows:
        return {}
    return tag_registered_test_numbers(tracking_uri, champion, rows[0], evaluation["test_set"])


def tag_registered_test_numbers(tracking_uri: str, version: dict, row: dict, test_set: dict) -> dict[str, str]:
    """A registered recognizer's held-out `test` row as its version's ``test_*`` tags (the pipeline's champion, or
    a version scored by ``whisperline evaluate --model``)."""
    return tag_version_test_numbers(tracking_uri, version["registered_model"], version["version"], row, test_set,
                                    ("wer", "word_latency_ms_median", "word_latency_ms_p90", "rtf"))
