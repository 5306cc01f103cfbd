"""A registered two-pass recognizer from the registry to the socket: the Ray Serve app (real local Ray, real sqlite
MLflow registry, real tiny.en weights) serves the version behind ``champion``, and a real-time WebSocket stream of
real speech gives the final transcript the evaluate stage gives for ``models:/…@champion`` (same spec, same
builder), on an utterance and on a 40 s stream of several (past Whisper's 30 s context: segmented alike).

The version holds a zero-initialised adapter (the original weights, no training here) and the "pad30" verifier
(no hush word to train); what is checked is that evaluation and serving run one recognizer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import free_port, original_weights_adapter

pytestmark = pytest.mark.slow
CHUNK_MS = 1000


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    from recognizer.registry import register_recognizer
    from recognizer.spec import RecognizerSpec, SecondPass, Weights
    from data.tracking import client

    root = tmp_path_factory.mktemp("recognizer-registry")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    adapter = original_weights_adapter(root / "adapter", CHUNK_MS)
    reg = register_recognizer(uri, RecognizerSpec("two-pass", "two-pass", CHUNK_MS, Weights("tiny.en", str(adapter)),
                                                  second_pass=SecondPass(padding="pad30", final_padding="pad30",
                                                                         every_ms=CHUNK_MS, heartbeat_ms=0)))
    client(uri).set_registered_model_alias(reg["registered_model"], "champion", reg["version"])
    return {"uri": uri, **reg}


@pytest.fixture(scope="module")
def server(registry, ray_cluster):
    from ray import serve

    from serving.app import ServeSettings, run

    settings = ServeSettings(tracking_uri=registry["uri"], registered_model=registry["registered_model"],
                             alias="champion", max_streams=2, compute_threads=1, torch_threads=1, poll_s=5.0,
                             max_backlog_ms=60_000, idle_timeout_s=60)
    url = run(settings, free_port(), num_cpus=1)
    yield url
    serve.shutdown()


@pytest.fixture(scope="module")
def speech(realspeech: Path):
    from evaluation.sets import Utterance, load_realspeech

    utts = load_realspeech(realspeech, ("cmu_arctic", "ljspeech"), limit={"cmu_arctic": 1, "ljspeech": 10})
    gap = np.zeros(8000, dtype=np.float32)  # 0.5 s between sentences, as a reader pauses
    pieces, words, offset_ms = [], [], 0
    for u in utts:  # one continuous reading of ≥ 40 s, its aligned words shifted to their place in it
        words += [(w, s + offset_ms, e + offset_ms) for w, s, e in u.words]
        pieces += [u.audio.astype(np.float32), gap]
        offset_ms += (len(u.audio) + len(gap)) // 16
        if offset_ms >= 40_000:
            break
    assert offset_ms >= 40_000, "not enough speech for a stream past 30 s"
    reference = " ".join(u.reference for u in utts[: len(pieces) // 2])
    return {"short": utts[0], "long": Utterance("long", np.concatenate(pieces), reference, tuple(words))}


def _pcm(audio: np.ndarray) -> np.ndarray:
    return np.clip(np.round(audio * 32767), -32768, 32767).astype("<i2")


def _evaluated(registry, utterances, tmp_path) -> list[str]:
    """What `whisperline evaluate --model models:/NAME@champion` scores: the spec read back from the registry,
    built by the one builder, every utterance streamed (PCM16-rounded audio, as the socket carries it)."""
    from recognizer.registry import load_spec
    from recognizer.evaluate import evaluate_systems

    spec, version = load_spec(registry["uri"], f"models:/{registry['registered_model']}@champion", tmp_path)
    assert version["version"] == registry["version"] and spec.kind == "two-pass"
    result = evaluate_systems([spec], utterances, test_set={"n_utterances": len(utterances)}, live=False,
                              n_resamples=200, log=lambda *_: None)
    return [e["hyp"] for e in result["systems"][0]["per_utterance"]]


def test_served_two_pass_champion_gives_the_evaluated_transcript(server, registry, speech, tmp_path):
    from evaluation.sets import Utterance
    from serving.client import stream_samples

    short, long = speech["short"], speech["long"]
    pcm_short, pcm_long = _pcm(short.audio), _pcm(long.audio)
    as_sent = [Utterance(short.utt_id, pcm_short.astype(np.float32) / 32768.0, short.reference, short.words),
               Utterance("long", pcm_long.astype(np.float32) / 32768.0, long.reference, long.words)]
    expected = _evaluated(registry, as_sent, tmp_path)
    assert expected[0] and len(expected[1].split()) > 60  # 40 s of read speech: many words, past one segment

    live = stream_samples(server, pcm_short, realtime=True)  # the client `whisperline stream-file` uses
    assert live.ready["model"]["version"] == registry["version"] and live.ready["model"]["kind"] == "two-pass"
    assert live.text == expected[0]
    finals = [w for e in live.events if e["type"] == "final" for w in e["words"]]
    assert " ".join(finals) == expected[0] and live.final_latencies_ms()

    long_stream = stream_samples(server, pcm_long, realtime=False, catch_up=False)  # faster than real time
    assert long_stream.text == expected[1] and long_stream.summary["audio_ms"] >= 40_000


def test_a_real_time_stream_outlives_the_keepalive(server, speech):
    """`whisperline stream-file` reads the server's events while it sends. A client that read them only after
    sending stopped reading the socket once 16 events were waiting, the server's pong waited behind them, and the
    keepalive closed every stream longer than ping interval + timeout (20 + 20 s by default; 1 + 1 s here)."""
    from serving.client import stream_samples

    pcm = _pcm(speech["long"].audio)
    live = stream_samples(server, pcm, realtime=True, keepalive_s=1.0)
    assert live.summary["audio_ms"] >= 40_000 and len(live.text.split()) > 60
    assert len(live.events) > 16  # more than the client's buffer holds: the case that failed
