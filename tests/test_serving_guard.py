"""What a client may cost and who may connect, without a server: origins, tokens, per-client counts, the per-stream
frame and audio-rate budget on a fake clock; uploads refused from their header; and property-based fuzzing of the
protocol's parsers and frame decoder (every input ends in a typed refusal or samples, never another exception)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import silent_flac
from data.audio import AudioReject, load_audio_bytes
from serving.guard import (BEARER_SUBPROTOCOL, LOOPBACK_ORIGINS, ClientTable, StreamGuard, offered_token,
                           origin_allowed, token_ok)
from serving.protocol import CLOSE_CODES, FORMATS, MAX_FRAME_S, ProtocolError, decode_frame, parse_config, parse_text


def test_origins():
    assert origin_allowed(None, LOOPBACK_ORIGINS)  # not a browser
    assert origin_allowed("http://127.0.0.1:8123", LOOPBACK_ORIGINS)
    assert origin_allowed("http://LOCALHOST:9", LOOPBACK_ORIGINS)
    for bad in ("https://evil.example", "http://127.0.0.1.evil.example:8000", "null", "http://[::1", ""):
        assert not origin_allowed(bad, LOOPBACK_ORIGINS), bad
    assert origin_allowed("https://app.example.com", ("https://app.example.com:443", "https://app.example.com"))
    assert not origin_allowed("https://app.example.com:444", ("https://app.example.com:443",))
    assert origin_allowed("https://anything.example", ("*",))


def test_tokens_from_header_or_subprotocol_never_elsewhere():
    assert offered_token({"authorization": "Bearer s3cret"}) == ("s3cret", None)
    proto = BEARER_SUBPROTOCOL + "s3cret"
    assert offered_token({"sec-websocket-protocol": f"chat, {proto}"}) == ("s3cret", proto)
    assert offered_token({"cookie": "token=s3cret"}) == (None, None)
    assert token_ok(None, None) and token_ok("", "whatever")
    assert token_ok("s3cret", "s3cret") and not token_ok("s3cret", "s3cre") and not token_ok("s3cret", None)


def test_a_token_comes_from_its_file_before_the_environment(tmp_path, monkeypatch):
    """Server and client (``serve-model`` and ``stream-file --token-file``) read a token by the same rule."""
    from serving.settings import TOKEN_ENV, read_token

    monkeypatch.delenv(TOKEN_ENV, raising=False)
    assert read_token(None) is None
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    assert read_token(None) == "from-env"
    (tmp_path / "token").write_text("from-file\n")
    assert read_token(str(tmp_path / "token")) == "from-file"
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(ValueError, match="is empty"):
        read_token(str(tmp_path / "empty"))


def test_client_table():
    table = ClientTable(2)
    assert table.enter("a") and table.enter("a") and not table.enter("a") and table.enter("b")
    table.leave("a")
    assert table.enter("a") and table.open == {"a": 2, "b": 1}
    for _ in range(3):
        table.leave("b")
    assert "b" not in table.open
    assert all(ClientTable(0).enter("x") for _ in range(100))


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_live_stream_passes_and_holders_and_floods_do_not():
    clock = Clock()
    live = StreamGuard(min_speed=0.5, slack_s=10, max_frames_per_s=200, frame_burst=1000, clock=clock)
    for _ in range(60 * 50):  # a minute of 20 ms frames in real time, as the browser page sends them
        clock.t += 0.02
        live.frame(20)
        assert live.time_left() > 10
    # a socket held without any audio: gone after first_audio_s, not the whole slack
    clock = Clock()
    silent = StreamGuard(clock=clock)
    assert silent.time_left() == pytest.approx(3.0)
    # the holder: one 10 s frame every 59 s
    clock = Clock()
    holder = StreamGuard(clock=clock)
    holder.frame(10_000)
    assert holder.time_left() == pytest.approx(30.0)  # (10 s slack + 10 s of audio / 0.5)
    clock.t += 30.0
    assert holder.time_left() <= 0 and holder.too_slow().code == "too_slow"
    # time the server held the client back (back-pressure) is not the client's
    holder.hold(20.0)
    assert holder.time_left() == pytest.approx(20.0)
    # 1-sample frames as fast as a socket goes: the burst, then refused
    clock = Clock()
    flood = StreamGuard(clock=clock)
    with pytest.raises(ProtocolError) as err:
        for _ in range(2000):
            flood.frame(1 / 16)
    assert err.value.code == "rate_limited" and err.value.close_code == CLOSE_CODES["rate_limited"]
    assert flood.audio_s == pytest.approx(1000 / 16 / 1000)


def test_a_decompression_bomb_is_refused_from_its_header():
    import resource

    bomb = silent_flac(2 * 3600)  # two hours of 48 kHz stereo silence: ~1.4 MB of FLAC, 2.8 GB of float32 decoded
    assert len(bomb) < 3_000_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(AudioReject) as err:
        load_audio_bytes(bomb, max_duration_s=600)
    assert err.value.reason == "too_long" and "7200" in err.value.detail
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100, grown_mb  # the header was read; nothing was decoded
    with pytest.raises(AudioReject) as err:
        load_audio_bytes(b"\x00" * 1000, max_duration_s=600)
    assert err.value.reason == "unreadable_audio"


# ---------------------------------------------------------------------- fuzzing the protocol
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096), st.sampled_from(sorted(FORMATS)))
def test_any_bytes_decode_to_samples_or_a_typed_refusal(data, fmt):
    try:
        samples = decode_frame(data, fmt)
    except ProtocolError as err:
        assert err.code in CLOSE_CODES
        return
    assert samples.dtype == np.float32 and np.isfinite(samples).all() and np.abs(samples).max(initial=0) <= 1.0
    assert len(samples) == len(data) // FORMATS[fmt].itemsize <= MAX_FRAME_S * 16000


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                                         max_size=4), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), json_values.map(json.dumps),
                 st.fixed_dictionaries({"type": st.sampled_from(["config", "end", "x"])},
                                       optional={"sample_rate": json_values, "format": json_values,
                                                 "chunk_ms": json_values, "catch_up": json_values,
                                                 "extra": json_values}).map(json.dumps)))
def test_any_text_message_parses_or_is_refused_with_a_code(text):
    try:
        message = parse_text(text)
        if message["type"] == "config":
            config = parse_config(message, (300, 1000))
            assert config.format in FORMATS and config.chunk_ms in (None, 300, 1000)
            assert config.chunk_ms is None or type(config.chunk_ms) is int
    except ProtocolError as err:
        assert err.code in ("bad_message", "bad_config")


def _ledger(limit: int = 2):
    from serving.clients import ClientLedger

    return ClientLedger.func_or_class(limit, per_minute=0)


def test_a_stale_table_does_not_erase_a_connection_counted_after_it():
    """The race a replica's sync thread runs: its snapshot (taken before a connection) reaches the ledger after
    that connection was counted. The table must not erase it, or a third connection from the client gets in."""
    ledger, replica = _ledger(), ClientTable(0)
    stale = replica.snapshot()  # the sync thread's copy, before any connection
    for _ in range(2):
        replica.enter("c")
        assert ledger.enter("r1", "c", replica.version) is None
    ledger.sync("r1", stale[1], stale[0])  # arrives late
    assert ledger.open() == {"c": 2}
    replica.enter("c")
    assert ledger.enter("r1", "c", replica.version) == "client_limit"
    replica.leave("c")
    assert ledger.open() == {"c": 2}


def test_a_table_that_already_holds_a_connection_does_not_count_it_twice():
    ledger, replica = _ledger(), ClientTable(0)
    replica.enter("c")
    fresh = replica.snapshot()  # taken while the replica waits for the ledger's answer, arrives first
    ledger.sync("r1", fresh[1], fresh[0])
    assert ledger.enter("r1", "c", replica.version) is None
    assert ledger.open() == {"c": 1}
    replica.leave("c")
    ledger.leave("r1", "c", replica.version)
    assert ledger.open() == {}
    ledger.sync("r1", *reversed(fresh))  # an old table after the leave: dropped
    assert ledger.open() == {}


def test_the_limit_spans_replicas_and_a_refusal_leaves_no_count():
    ledger, a, b = _ledger(), ClientTable(0), ClientTable(0)
    for replica, name in ((a, "a"), (b, "b")):
        replica.enter("c")
        assert ledger.enter(name, "c", replica.version) is None
    b.enter("c")
    b_version = b.version
    ledger.sync("b", *reversed(b.snapshot()))  # b's table holding the connection it is asking about
    assert ledger.enter("b", "c", b_version) == "client_limit"
    assert ledger.open() == {"c": 2}
    b.leave("c")
    ledger.sync("b", *reversed(b.snapshot()))
    assert ledger.open() == {"c": 2}
