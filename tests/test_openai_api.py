"""OpenAI's transcription API in our terms (serving/openai_api.py, serving/timestamps.py): the request checks as
OpenAI makes them, each response format, cues from timed words, and word timing by segment with the real
pocketsphinx aligner on real speech (a segment it cannot place keeps its words, spread, and says so)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from serving.openai_api import RequestError, delta_event, done_event, error_body, parse_request, render
from serving.timestamps import Cue, TimedWord, cues, srt, time_words, vtt

IDS = ["m", "m@champion", "m/3", "whisper-1"]


def _req(**fields):
    return parse_request({"model": "m", **fields}, IDS)


@pytest.mark.parametrize(("fields", "status", "code", "param"), [
    ({"model": ""}, 400, "missing_required_parameter", "model"),
    ({"model": "gpt-4o-transcribe"}, 404, "model_not_found", "model"),
    ({"response_format": "docx"}, 400, "invalid_value", "response_format"),
    ({"response_format": "verbose_json", "granularities": ["char"]}, 400, "invalid_value",
     "timestamp_granularities[]"),
    ({"granularities": ["word"]}, 400, "invalid_value", "timestamp_granularities[]"),  # json has no times
    ({"language": "de"}, 400, "unsupported_language", "language"),
    ({"stream": "true", "response_format": "srt"}, 400, "invalid_value", "stream"),
    ({"temperature": "hot"}, 400, "invalid_value", "temperature"),
    ({"temperature": "1.5"}, 400, "invalid_value", "temperature"),
])
def test_requests_openai_refuses(fields, status, code, param):
    with pytest.raises(RequestError) as err:
        _req(**fields)
    assert (err.value.status, err.value.code, err.value.param) == (status, code, param)
    body = error_body(err.value.status, err.value.code, str(err.value), err.value.param)["error"]
    assert set(body) == {"message", "type", "param", "code"} and body["message"]


def test_requests_accepted():
    r = _req(model="whisper-1", language="EN", prompt="ignored", temperature="0", stream="true")
    assert r.stream and r.response_format == "json" and not r.needs_times
    r = _req(response_format="verbose_json", granularities=["word"])
    assert r.granularities == ("word",) and r.needs_times
    assert error_body(401, "unauthorized", "x")["error"]["code"] == "invalid_api_key"
    assert error_body(503, "busy", "x")["error"]["type"] == "server_error"


WORDS = [TimedWord("Hello", 0.0, 0.4, True), TimedWord("world.", 0.5, 0.9, True),
         TimedWord("A", 2.5, 2.6, True), TimedWord("pause", 2.7, 3.0, False)]


def test_cues_break_at_sentences_pauses_and_length():
    assert cues(WORDS) == [Cue(0.0, 0.9, "Hello world."), Cue(2.5, 3.0, "A pause")]
    long = [TimedWord(f"w{i}", i * 0.5, i * 0.5 + 0.4, True) for i in range(40)]  # 20 s without a break
    groups = cues(long)
    assert all(c.end - c.start <= 7.0 and len(c.text) <= 84 for c in groups)
    assert " ".join(c.text for c in groups) == " ".join(w.word for w in long)
    assert srt(cues(WORDS)) == ("1\n00:00:00,000 --> 00:00:00,900\nHello world.\n\n"
                                "2\n00:00:02,500 --> 00:00:03,000\nA pause\n\n")
    assert vtt([Cue(3661.5, 3662.25, "x")]) == "WEBVTT\n\n01:01:01.500 --> 01:01:02.250\nx\n\n"


def test_render_each_format():
    text = "Hello world. A pause"
    body, media = render(_req(), text, 3.2)
    assert json.loads(body) == {"text": text, "usage": {"type": "duration", "seconds": 4}}
    assert render(_req(response_format="text"), text, 3.2)[0] == text + "\n"
    verbose = json.loads(render(_req(response_format="verbose_json", granularities=["word", "segment"]), text, 3.2,
                                WORDS)[0])
    assert verbose["duration"] == 3.2 and [w["word"] for w in verbose["words"]] == text.split()
    assert verbose["words"][3]["aligned"] is False
    assert [s["text"] for s in verbose["segments"]] == [" Hello world.", " A pause"]
    assert verbose["segments"][0]["avg_logprob"] is None  # not computed by a streaming recognizer: not invented
    assert "words" not in json.loads(render(_req(response_format="verbose_json"), text, 3.2, WORDS)[0])
    assert render(_req(response_format="vtt"), text, 3.2, WORDS)[1].startswith("text/vtt")
    deltas = [delta_event(["Hello", "world."], True), delta_event(["A", "pause"], False)]
    assert "".join(d["delta"] for d in deltas) == done_event(text, 3.2)["text"]


def test_words_timed_segment_by_segment_on_real_speech(realspeech):
    """Two real utterances as two segments of one stream: each word lands inside its own segment's audio near its
    reference alignment; a segment whose transcript does not fit its audio is spread, not dropped."""
    from data.aligners import get_aligner
    from evaluation.sets import load_realspeech

    utts = list(load_realspeech(realspeech, ("ljspeech",), limit={"ljspeech": 2}))
    audio = np.concatenate([u.audio.astype(np.float32) for u in utts])
    words = [w for u in utts for w in u.reference.split()]
    n0, s0 = len(utts[0].reference.split()), len(utts[0].audio)
    spans = [(0, s0, 0, n0), (s0, len(audio), n0, len(words))]
    timed = time_words(audio, words, spans, get_aligner("pocketsphinx"))
    assert " ".join(w.word for w in timed) == " ".join(words) and all(w.aligned for w in timed)
    from data.text import transcript_words

    k, cut = len(transcript_words(utts[0].reference)), s0 / 16000
    assert all(w.end <= cut + 1e-6 for w in timed[:k]) and all(w.start >= cut - 1e-6 for w in timed[k:])
    assert timed[0].start < 1.0 and timed[k - 1].end > cut - 1.0  # the speech fills each clip
    if utts[0].words:  # the corpus's own alignment of the first clip's last word
        assert abs(timed[k - 1].end - utts[0].words[-1][2] / 1000) < 0.3
    wrong = time_words(audio[:s0], ["completely", "different", "words"] * 8, [(0, s0, 0, 24)],
                       get_aligner("pocketsphinx"))
    assert len(wrong) == 24 and not any(w.aligned for w in wrong)
    assert wrong[-1].end == pytest.approx(s0 / 16000)
