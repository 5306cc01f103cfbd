"""Issue 67: `serve-model`'s Prometheus metrics (`GET /metrics`), scraped during two live streams of real speech and
a connection refused for capacity, parsed with prometheus_client's own parser: the counters and histograms moved by
what the streams' summaries say they did. A live `serve-model` process (its own Ray, a real sqlite registry, the
real tiny.en weights, the served two-pass spec)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.request

import numpy as np
import pytest

from conftest import realspeech_root
from serve_process import start_server, stop_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


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


@pytest.fixture(scope="module")
def speech() -> list[np.ndarray]:
    from evaluation.sets import load_realspeech

    root = realspeech_root()
    if not (root / "ljspeech" / "transcripts.tsv").exists():
        pytest.skip(f"real speech corpus not found at {root} (set WHISPERLINE_REALSPEECH)")
    return [u.audio.astype(np.float32) for u in load_realspeech(root, ("ljspeech",), limit={"ljspeech": 2})]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from recognizer.registry import register_recognizer
    from recognizer.spec import load
    from data.tracking import client

    root = tmp_path_factory.mktemp("metrics-registry")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    reg = register_recognizer(uri, load())
    client(uri).set_registered_model_alias(reg["registered_model"], "champion", reg["version"])
    url, proc, ray_tmp = start_server({"uri": uri, "alias": "champion", **reg}, root / "serve-model.log",
                                      args=("--max-streams", "2"))
    try:
        yield url, reg["version"]
    finally:
        stop_server(proc, ray_tmp)


def test_metrics_follow_two_live_streams_and_a_refusal(server, speech):
    from serving.client import stream_samples
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url, version = server
    before = scrape(url)
    served = {dict(k[1])["version"]: v for k, v in before.items() if k[0] == "whisperline_served_version"}
    assert served == {version: 1.0}
    assert before[("whisperline_versions_loaded_total", (("version", version),))] == 1.0

    results: list = [None, None]

    def run(i: int) -> None:
        results[i] = stream_samples(url, speech[i], realtime=True)

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
    with connect(url.replace("http://", "ws://") + "/ws", open_timeout=30) as ws:  # a third: no slot left
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
