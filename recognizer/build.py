"""The one builder: a :class:`~recognizer.spec.RecognizerSpec` in, a running recognizer and its source out.

What the evaluate stage scores, what ``whisperline evaluate models:/…`` loads, what the pyfunc model and the server
stream: all built here, by :func:`build`. The parts compose in one place (as openai/whisper's ``DecodingTask``
composes a ``DecodingOptions``): the causal engine, then for two-pass the verifier over it, then the segmentation
that lets either run on streams of any length. Models are loaded once per (model, adapter, precision) and shared:
the recognizers only read them.

The backends (torch, openai-whisper, the trained parts) are imported in the functions that build them, so that
spec-only callers (``default_specs``, ``peer_specs``: the pipeline's planning) load none of them.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from configs.finetune import default_tau0_ms
from evaluation.offline import FasterWhisperOffline
from evaluation.peers import PEER_SOURCE, WhisperLiveKitLocalAgreement, WhisperLiveKitSimulStreaming
from recognizer.spec import Decoding, Peer, RecognizerSpec, Weights, hush_word_model
from streaming.segmented import Segmented


class Models:
    """Each (model, adapter, merge, precision) loaded once."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str | None, bool, str], Any] = {}

    def get(self, name: str, adapter_dir: str | None, merge: bool = True, precision: str = "fp32"):
        from training.causal.evaluate import load_tuned

        key = (name, adapter_dir, merge and adapter_dir is not None, precision)
        if key not in self._cache:
            self._cache[key] = load_tuned(name, adapter_dir, merge=merge, precision=precision)
        return self._cache[key]


def build(spec: RecognizerSpec, models: Models | None = None) -> tuple[Any, str]:
    """(recognizer, source: ``ours`` or ``pypi:<package>==<version>``). Ours come wrapped in
    ``streaming.segmented.Segmented`` (streams of any length, as served); the peers trim their own buffers, as
    their servers do."""
    models = models or Models()
    if spec.kind == "offline":
        from streaming.baselines.offline import OfflineWhisper

        return OfflineWhisper(models.get(spec.model, None)), "ours"
    if spec.kind == "faster-whisper":
        return FasterWhisperOffline(spec.model), f"pypi:faster-whisper=={importlib.metadata.version('faster-whisper')}"
    if spec.kind in ("whisperlivekit-la", "whisperlivekit-simul"):
        cls = WhisperLiveKitLocalAgreement if spec.kind == "whisperlivekit-la" else WhisperLiveKitSimulStreaming
        return cls(spec.chunk_ms or 1000, spec.model, vac=spec.peer.vac), PEER_SOURCE
    if spec.kind not in ("causal", "two-pass"):
        raise ValueError(f"unknown system kind {spec.kind!r}")
    recognizer = causal_engine(spec, models)
    if spec.kind == "two-pass":
        recognizer = two_pass(spec, recognizer, models)
    seg = spec.segmentation
    return Segmented(recognizer, segment_ms=seg.segment_ms, max_segment_ms=seg.max_segment_ms), "ours"


def causal_engine(spec: RecognizerSpec, models: Models):
    """The block-causal engine with the spec's weights and write policy (the stability rule or EMMA)."""
    from streaming.engine import CausalStreamingEngine

    chunk = spec.chunk_ms or 300
    tau0 = default_tau0_ms(chunk)
    w, dec = spec.weights, spec.decoding
    if dec.emma_dir:
        from training.emma.artifact import load_policy
        from training.emma.decoding import emma_decoder

        model, policy, meta = load_policy(dec.emma_dir, w.adapter_dir)
        decoder = emma_decoder(policy, dec.t_emma, meta["config"].get("max_stall", 3),
                               meta["config"].get("decision", "min"))
        return CausalStreamingEngine(model, chunk, tau0, decoder=decoder)
    model = models.get(w.model, w.adapter_dir, w.merge_adapter, w.precision)
    return CausalStreamingEngine(model, chunk, tau0, beam_size=dec.beam_size, cache_policy=spec.causal.cache_policy,
                                 restart_words=spec.causal.restart_words)


def two_pass(spec: RecognizerSpec, engine, models: Models):
    """The verifier (original weights, the spec's precision) over the causal engine."""
    from streaming.second_pass import TwoPassStreaming
    from streaming.verifier import Verifier

    sp = spec.second_pass
    hush = None
    if sp.hush_dir:
        from streaming.hush.frontend import load_hush_word

        trained_for = hush_word_model(sp.hush_dir)
        if trained_for not in (None, spec.model):  # a hush word is learned against one model's encoder
            raise ValueError(f"{spec.name}: the hush word {sp.hush_dir} was trained for {trained_for}, not "
                             f"{spec.model}: train one for {spec.model} (whisperline hush-word)")
        hush = load_hush_word(sp.hush_dir)
    verifier = Verifier(models.get(spec.model, None, precision=spec.weights.precision), hush, sp.padding,
                        final_condition=sp.final_padding)
    return TwoPassStreaming(engine, verifier, sp.every_ms, self_agreement=sp.self_agreement,
                            window_ms=sp.window_ms or None, partials=sp.partials,
                            verifier_restart_words=sp.restart_words, verifier_restart_distinct=sp.restart_distinct,
                            verifier_restart_whole=sp.restart_whole, verifier_restart_long=sp.restart_long,
                            partial_min_prob=sp.partial_min_prob, heartbeat_ms=sp.heartbeat_ms or None,
                            hold_last_edge_ms=sp.hold_last_edge_ms or None)


def default_specs(chunk_sizes: list[int], adapters: dict[int, str] | None = None, rcs_adapter: str | None = None,
                  emma_dir: str | None = None, emma_adapter: str | None = None, t_emma: float = 0.3,
                  peers: bool = True, model: str = "tiny.en", emma_chunk_ms: int | None = None,
                  two_pass: RecognizerSpec | None = None, peer_chunk_sizes: list[int] | None = None,
                  causal_beam: int | None = None) -> list[RecognizerSpec]:
    """Offline references, our causal engine (original weights, tuned per-chunk and random-chunk adapters, EMMA)
    and the PyPI peers at every chunk size. An EMMA policy is scored at ``emma_chunk_ms`` only (the chunk size it
    and its adapter were trained at) when given, else at every size. ``two_pass``: a two-pass spec scored at every
    size with a tuned adapter, over that adapter. ``peer_chunk_sizes``: the sizes the peers run at (default: every
    size). ``causal_beam``: the tuned and random-chunk adapters also with streaming beam search of that width."""
    weights = Weights(model)
    specs = [RecognizerSpec("offline Whisper (ours, 30 s pad)", "offline", None, weights)]
    if peers:
        specs.append(RecognizerSpec("faster-whisper offline", "faster-whisper", None, weights))
    for chunk in chunk_sizes:
        specs.append(RecognizerSpec(f"causal original weights {chunk} ms", "causal", chunk, weights))
        tuned = [(f"causal tuned {chunk} ms", adapters[chunk])] if adapters and chunk in adapters else []
        tuned += [(f"causal random-chunk adapter {chunk} ms", rcs_adapter)] if rcs_adapter else []
        for name, adapter in tuned:
            specs.append(RecognizerSpec(name, "causal", chunk, Weights(model, adapter)))
            if causal_beam and causal_beam > 1:
                specs.append(RecognizerSpec(f"{name} beam {causal_beam}", "causal", chunk, Weights(model, adapter),
                                            decoding=Decoding(beam_size=causal_beam)))
        if emma_dir and emma_chunk_ms in (None, chunk):
            specs.append(RecognizerSpec(f"causal tuned + EMMA {chunk} ms", "causal", chunk,
                                        Weights(model, emma_adapter), decoding=Decoding(1, emma_dir, t_emma)))
        if two_pass and adapters and chunk in adapters:
            specs.append(two_pass.with_(name=f"two-pass (tuned + verifier) {chunk} ms", chunk_ms=chunk,
                                        weights={"model": model, "adapter_dir": adapters[chunk]}))
        if peers and (peer_chunk_sizes is None or chunk in peer_chunk_sizes):
            specs += peer_specs(chunk, model)
    return specs


def peer_specs(chunk_ms: int, model: str = "tiny.en", vac: bool = False) -> list[RecognizerSpec]:
    """whisperlivekit's two policies at ``chunk_ms``, on ``model``'s weights."""
    return [RecognizerSpec(f"whisperlivekit {label} {chunk_ms} ms", kind, chunk_ms, Weights(model), peer=Peer(vac))
            for label, kind in (("LocalAgreement-2", "whisperlivekit-la"), ("SimulStreaming", "whisperlivekit-simul"))]
