"""The dev rules that adopt a setting, read off per-stream rows alone. ``benchmarks.common.latency_choice``
(heartbeat, hold_last_edge) takes a setting only when it is separably sooner without being separably less accurate
or too costly, and prefers the cautious end when two are not separable. ``compute_choice`` (verifier precision)
takes one only when it is separably cheaper, within a WER non-inferiority margin on every set, and not later."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is not an installed package
from benchmarks.common import compute_choice, latency_choice  # noqa: E402

N = 12  # streams


def _row(name: str, errors: list[int], latency_ms: list[float], rtf: float = 0.3) -> dict:
    per = [{"utt_id": f"s{i}", "ref_words": 50, "errors": e, "word_latency_ms": [lat] * 10,
            "compute_ms": rtf * 1000, "audio_ms": 1000} for i, (e, lat) in enumerate(zip(errors, latency_ms))]
    return {"name": name, "wer": sum(errors) / (50 * N), "rtf": rtf, "per_utterance": per,
            "word_latency_ms_median": sorted(latency_ms)[N // 2], "word_latency_ms_p90": max(latency_ms)}


def _write(tmp: Path, which: str, rows: list[dict]) -> None:
    (tmp / f"dev_x{'' if which == 'real' else '_' + which}.json").write_text(json.dumps({"systems": rows}))


def _streams(tmp: Path, fast: list[float], faster: list[float], errors_fast: list[int] | None = None,
             rtf: float = 0.3) -> None:
    base = [5] * N
    _write(tmp, "streams", [_row("off", base, [1200.0 + 10 * i for i in range(N)]),
                            _row("a", errors_fast or base, fast, rtf), _row("b", base, faster, rtf)])


def test_the_sooner_setting_is_taken_only_when_separably_sooner(tmp_path):
    _streams(tmp_path, [900.0 + 10 * i for i in range(N)], [890.0 + 10 * i + (i % 2) * 40 for i in range(N)])
    out = latency_choice("dev_x", "off", {600: "a", 300: "b"}, 0.5, selection=tmp_path)
    # both qualify; 300 ms is not separably sooner than 600: the cautious end (the larger setting)
    assert out["arms"]["300"]["qualifies"] and out["arms"]["600"]["qualifies"] and out["chosen"] == 600
    assert out["sets_not_scored"] == ["real", "synthetic"]
    _streams(tmp_path, [900.0 + 10 * i for i in range(N)], [500.0 + 10 * i for i in range(N)])
    assert latency_choice("dev_x", "off", {600: "a", 300: "b"}, 0.5, selection=tmp_path)["chosen"] == 300


def test_less_accurate_or_too_costly_settings_are_refused(tmp_path):
    soon = [700.0 + 10 * i for i in range(N)]
    _streams(tmp_path, soon, soon, errors_fast=[15] * N)
    out = latency_choice("dev_x", "off", {600: "a"}, 0.5, selection=tmp_path)
    assert not out["arms"]["600"]["qualifies"] and out["chosen"] is None  # separably more errors
    _streams(tmp_path, soon, soon, rtf=0.8)
    assert latency_choice("dev_x", "off", {600: "a", 300: "b"}, 0.5, selection=tmp_path)["chosen"] is None
    _streams(tmp_path, [1200.0 + 10 * i for i in range(N)], soon)
    assert latency_choice("dev_x", "off", {600: "a"}, 0.5, selection=tmp_path)["chosen"] is None  # not sooner


def test_the_streams_are_needed(tmp_path):
    _write(tmp_path, "real", [_row("off", [5] * N, [1.0] * N)])
    with pytest.raises(FileNotFoundError, match="--set streams"):
        latency_choice("dev_x", "off", {600: "a"}, 0.5, selection=tmp_path)


def _cheaper(tmp: Path, errors: list[int], rtf: list[float], sets=("real", "synthetic", "streams")) -> None:
    lat = [1000.0 + 10 * i for i in range(N)]
    for which in sets:
        ref = _row("ref", [5] * N, lat)
        arm = _row("a", errors, lat)
        for u, r in zip(arm["per_utterance"], rtf):
            u["compute_ms"] = r * 1000
        arm["rtf"] = sum(rtf) / N
        _write(tmp, which, [ref, arm])


def test_a_cheaper_setting_is_taken_only_within_the_wer_margin_on_every_set(tmp_path):
    cheap = [0.2 + 0.01 * (i % 3) for i in range(N)]
    _cheaper(tmp_path, [5] * N, cheap)
    out = compute_choice("dev_x", "ref", {"int8": "a"}, 0.01, selection=tmp_path)
    assert out["chosen"] == "int8" and out["arms"]["int8"]["streams_rtf_vs_reference_ci95"][1] < 0
    # one more error in 2 of the 12 streams: +0.33 point, within a 1-point margin, past a 0.2-point one
    _cheaper(tmp_path, [6 if i in (0, 6) else 5 for i in range(N)], cheap)
    assert compute_choice("dev_x", "ref", {"int8": "a"}, 0.01, selection=tmp_path)["chosen"] == "int8"
    assert compute_choice("dev_x", "ref", {"int8": "a"}, 0.002, selection=tmp_path)["chosen"] is None
    # every other stream: +1 point, its interval's upper end past a 1-point margin
    _cheaper(tmp_path, [5 + i % 2 for i in range(N)], cheap)
    assert compute_choice("dev_x", "ref", {"int8": "a"}, 0.01, selection=tmp_path)["chosen"] is None


def test_a_setting_that_is_not_cheaper_or_not_scored_everywhere_is_refused(tmp_path):
    _cheaper(tmp_path, [5] * N, [0.3] * N)  # the reference's compute
    assert compute_choice("dev_x", "ref", {"int8": "a"}, 0.01, selection=tmp_path)["chosen"] is None
    fresh = tmp_path / "only_streams"
    fresh.mkdir()
    _cheaper(fresh, [5] * N, [0.2] * N, sets=("streams",))
    out = compute_choice("dev_x", "ref", {"int8": "a"}, 0.01, selection=fresh)
    assert out["chosen"] is None and out["sets_not_scored"] == ["real", "synthetic"]


def _words(tmp: Path, real: list[int], streams: list[int], latency: float = 1000.0,
           sets=("real", "synthetic", "streams")) -> None:
    lat = [1000.0 + 10 * i for i in range(N)]
    for which in sets:
        arm = {"real": real, "streams": streams}.get(which, [5] * N)
        _write(tmp, which, [_row("ref", [5] * N, lat), _row("a", arm, [x - 1000.0 + latency for x in lat])])
