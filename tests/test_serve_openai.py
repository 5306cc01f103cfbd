"""Issue 67: `serve-model` speaks the ecosystem's protocols, on real speech, against one live `serve-model` process
(its own Ray, a real sqlite MLflow registry, the real tiny.en weights, the served two-pass spec, a bearer token, two
stream slots):

- OpenAI's transcription API, driven by the official `openai` package a team would use
  (`OpenAI(base_url=…, api_key=token).audio.transcriptions.create`): every format, the event stream, the errors in
  OpenAI's shape;
- Prometheus metrics (`GET /metrics`), scraped during two live streams and a connection refused for capacity,
  parsed with prometheus_client's own parser: the counters and histograms moved by what the streams' summaries say
  they did;
- a stop on Ctrl-C that leaves nothing (last: it ends the module's server)."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import threading
import time
import urllib.request

import numpy as np
import pytest
import soundfile as sf

from conftest import realspeech_root
from serve_process import signal_stop, start_server, stop_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
TOKEN = "sk-test-whisperline-0123456789"
CUE = re.compile(r"(\d\d:\d\d:\d\d[.,]\d{3}) --> (\d\d:\d\d:\d\d[.,]\d{3})\n(.+)")


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> dict:
    """Consecutive LJSpeech clips (0.3 s apart) until ≥ 7 s, as a 16-bit WAV file."""
    from evaluation.sets import load_realspeech

    root = realspeech_root()
    if not (root / "ljspeech" / "transcripts.tsv").exists():
        pytest.skip(f"real speech corpus not found at {root} (set WHISPERLINE_REALSPEECH)")
    pieces, texts = [], []
    for utt in load_realspeech(root, ("ljspeech",), limit={"ljspeech": 8}):
        pieces += [utt.audio.astype(np.float32), np.zeros(4800, dtype=np.float32)]
        texts.append(utt.reference)
        if sum(len(p) for p in pieces) >= 7 * 16000:
            break
    audio = np.concatenate(pieces[:-1])
    path = tmp_path_factory.mktemp("openai-speech") / "speech.wav"
    sf.write(path, audio, 16000, subtype="PCM_16")
    return {"path": path, "seconds": len(audio) / 16000, "reference": " ".join(texts)}


@pytest.fixture(scope="module")
def clips(speech) -> list[np.ndarray]:  # (after speech: skipped with it where there is no corpus)
    from evaluation.sets import load_realspeech

    return [u.audio.astype(np.float32) for u in load_realspeech(realspeech_root(), ("ljspeech",),
                                                                   limit={"ljspeech": 2})]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from recognizer.registry import register_recognizer
    from recognizer.spec import load
    from data.tracking import client

    root = tmp_path_factory.mktemp("openai-registry")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    reg = register_recognizer(uri, load())  # the served two-pass spec on the original weights
    client(uri).set_registered_model_alias(reg["registered_model"], "champion", reg["version"])
    registry = {"uri": uri, "alias": "champion", **reg}
    token_file = root / "token"
    token_file.write_text(TOKEN + "\n")
    # two slots: two held streams make the server busy (503) for an upload and a third stream
    url, proc, ray_tmp = start_server(registry, root / "serve-model.log",
                                      args=("--token-file", str(token_file), "--max-streams", "2"))
    try:
        yield {"url": url, "proc": proc, "ray_tmp": ray_tmp, **registry}
    finally:
        stop_server(proc, ray_tmp)


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels without deployment/replica): value} of one scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            assert s.labels.get("deployment") == "recognizer" and s.labels.get("replica"), s
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("deployment", "replica")))
            out[(s.name, labels)] = s.value
    return out


def moved(before: dict, after: dict, name: str, **labels) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def _client(served, key: str = TOKEN):
    from openai import OpenAI

    return OpenAI(base_url=f"{served['url']}/v1", api_key=key, max_retries=0, timeout=300)


def _transcribe_route(served, path) -> dict:
    request = urllib.request.Request(f"{served['url']}/transcribe", data=path.read_bytes(), method="POST",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return json.loads(response.read())


def test_every_format_and_the_stream_through_the_official_client(served, speech):
    from evaluation.metrics import wer

    c = _client(served)
    models = [m.id for m in c.models.list()]
    name = served["registered_model"]
    assert models[:3] == [name, f"{name}@champion", f"{name}/{served['version']}"] and "whisper-1" in models

    with open(speech["path"], "rb") as f:
        plain = c.audio.transcriptions.create(model=name, file=f)
    expected = _transcribe_route(served, speech["path"])["text"]
    assert plain.text == expected  # the same engine, fed the same pieces, as /transcribe
    assert wer([speech["reference"]], [plain.text]) < 0.3, plain.text

    with open(speech["path"], "rb") as f:
        text = c.audio.transcriptions.create(model="whisper-1", file=f, response_format="text", language="en",
                                             prompt="ignored", temperature=0.0)
    assert text.strip() == expected

    with open(speech["path"], "rb") as f:
        verbose = c.audio.transcriptions.create(model=name, file=f, response_format="verbose_json",
                                                timestamp_granularities=["word", "segment"])
    assert verbose.text == expected and verbose.language == "english"
    assert verbose.duration == pytest.approx(speech["seconds"], abs=0.01)
    words = verbose.words
    assert " ".join(w.word for w in words) == expected  # every word, in order, none dropped
    starts = [w.start for w in words]
    assert starts == sorted(starts) and all(0 <= w.start <= w.end <= verbose.duration + 1e-3 for w in words)
    assert sum(w.model_extra.get("aligned", False) for w in words) >= 0.8 * len(words)  # placed by the aligner
    assert words[0].start < 1.0 and words[-1].end > verbose.duration - 1.5  # the speech fills the file
    segments = verbose.segments
    assert " ".join(s.text.strip() for s in segments) == expected
    assert segments[0].start == words[0].start and segments[-1].end == words[-1].end

    for fmt in ("srt", "vtt"):
        with open(speech["path"], "rb") as f:
            subtitles = c.audio.transcriptions.create(model=name, file=f, response_format=fmt)
        cues = CUE.findall(subtitles)
        assert len(cues) == len(segments), subtitles
        assert " ".join(t for _, _, t in cues) == expected
        assert subtitles.startswith("WEBVTT") == (fmt == "vtt") and ("," in cues[0][0]) == (fmt == "srt")

    with open(speech["path"], "rb") as f:
        events = list(c.audio.transcriptions.create(model=name, file=f, stream=True))
    deltas = [e for e in events if e.type == "transcript.text.delta"]
    assert len(deltas) >= 2 and events[-1].type == "transcript.text.done"  # words came as they became final
    assert "".join(d.delta for d in deltas) == events[-1].text == expected


def test_metrics_follow_two_live_streams_and_a_refusal(served, clips):
    from serving.client import stream_samples
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url, version = served["url"], served["version"]
    before = scrape(url)
    served = {dict(k[1])["version"]: v for k, v in before.items() if k[0] == "whisperline_served_version"}
    assert served == {version: 1.0}
    assert before[("whisperline_versions_loaded_total", (("version", version),))] == 1.0

    results: list = [None, None]

    def run(i: int) -> None:
        results[i] = stream_samples(url, clips[i], realtime=True, token=TOKEN)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    during = {}
    for _ in range(40):  # both streams hold their slots once their first audio is in
        time.sleep(0.25)
        during = scrape(url)
        if during.get(("whisperline_open", (("route", "ws"),))) == 2.0:
            break
    assert during[("whisperline_open", (("route", "ws"),))] == 2.0, during
    with connect(url.replace("http://", "ws://") + "/ws", open_timeout=30,  # a third: no slot left
                 additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        events = []
        with contextlib.suppress(ConnectionClosed):  # closed with 1013 (try again later) after the error event
            for message in ws:
                events.append(json.loads(message))
    assert events[-1]["type"] == "error" and events[-1]["code"] == "busy", events
    for t in threads:
        t.join(timeout=120)
    after = scrape(url)

    summaries = [r.summary for r in results]
    assert moved(before, after, "whisperline_admitted_total", route="ws") == 2
    assert moved(before, after, "whisperline_refused_total", route="ws", reason="busy") == 1
    assert after[("whisperline_open", (("route", "ws"),))] == 0.0
    assert moved(before, after, "whisperline_step_seconds_count") == sum(s["steps"] for s in summaries)
    assert moved(before, after, "whisperline_step_seconds_sum") == pytest.approx(
        sum(s["compute_ms"] for s in summaries) / 1000, rel=0.01, abs=0.01)
    words = sum(s["words"] for s in summaries)
    assert words > 10 and moved(before, after, "whisperline_final_word_delay_seconds_count") == words
    assert moved(before, after, "whisperline_rtf_count", route="ws") == 2
    # real time on 2 cores: the server's own delay is far below the stream's length
    assert moved(before, after, "whisperline_final_word_delay_seconds_sum") / words < 3.0


def test_errors_in_openai_shape(served, speech, tmp_path):
    import openai
    from websockets.sync.client import connect

    name = served["registered_model"]
    with open(speech["path"], "rb") as f, pytest.raises(openai.AuthenticationError) as err:
        _client(served, "sk-wrong").audio.transcriptions.create(model=name, file=f)
    assert err.value.status_code == 401 and err.value.code == "invalid_api_key"
    assert err.value.body["type"] == "invalid_request_error" and err.value.body["message"]

    with open(speech["path"], "rb") as f, pytest.raises(openai.NotFoundError) as err:
        _client(served).audio.transcriptions.create(model="gpt-4o-transcribe", file=f)
    assert err.value.code == "model_not_found" and err.value.body["param"] == "model"

    long_file = tmp_path / "long.flac"  # 601 s: past max_upload_s, refused from its header (a few kB of FLAC)
    sf.write(long_file, np.zeros(601 * 16000, dtype=np.float32), 16000, format="FLAC")
    with open(long_file, "rb") as f, pytest.raises(openai.APIStatusError) as err:
        _client(served).audio.transcriptions.create(model=name, file=f)
    assert err.value.status_code == 413 and err.value.code == "too_long" and err.value.body["param"] == "file"

    big = tmp_path / "big.wav"  # 33 MB of WAV: past max_body_mb, refused from its declared length
    sf.write(big, np.zeros(33 * 2**20 // 2, dtype=np.float32), 16000, subtype="PCM_16")
    with open(big, "rb") as f, pytest.raises(openai.APIStatusError) as err:
        _client(served).audio.transcriptions.create(model=name, file=f)
    assert err.value.status_code == 413 and err.value.code == "body_too_large"

    # the server's two slots held by live streams: an upload is refused now (503), not queued
    ws_url = served["url"].replace("http://", "ws://") + "/ws"
    with contextlib.ExitStack() as held:
        for _ in range(2):
            ws = held.enter_context(connect(ws_url, additional_headers={"Authorization": f"Bearer {TOKEN}"},
                                            open_timeout=30))
            assert json.loads(ws.recv(timeout=60))["type"] == "ready"
            ws.send(np.zeros(16000, dtype="<i2").tobytes())  # its first audio: the socket takes a slot
        for _ in range(60):
            with urllib.request.urlopen(f"{served['url']}/healthz", timeout=30) as r:
                if json.loads(r.read())["live_streams"] == 2:
                    break
            time.sleep(0.5)
        with open(speech["path"], "rb") as f, pytest.raises(openai.InternalServerError) as err:
            _client(served).audio.transcriptions.create(model=name, file=f)
        assert err.value.status_code == 503 and err.value.code == "busy"
        assert err.value.body["type"] == "server_error"
    with urllib.request.urlopen(f"{served['url']}/healthz", timeout=30) as r:
        refused = json.loads(r.read())["refused"]
    assert {"unauthorized", "model_not_found", "too_long", "body_too_large", "busy"} <= set(refused), refused


def test_ctrl_c_stops_the_server_and_every_process_it_started(served):
    """Ctrl-C (SIGINT) stops `serve-model` within 10 s and leaves no process of its own (its Ray's included)."""
    stopped = signal_stop(served["proc"], served["ray_tmp"], signal.SIGINT)
    assert stopped["seconds"] is not None and stopped["seconds"] <= 10.0, stopped
    assert stopped["left"] == [], stopped
