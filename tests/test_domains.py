"""Per-domain rows (evaluation/domains.py): pooled counts per corpus and paired differences per corpus."""

from __future__ import annotations

import math

import pytest

from evaluation.domains import by_domain, markdown


def _row(name: str, errors: list[int]) -> dict:
    return {"name": name, "per_utterance": [{"utt_id": f"u{i}", "errors": e, "ref_words": 4, "word_latency_ms": [],
                                             "compute_ms": 1.0, "audio_ms": 1.0}
                                            for i, e in enumerate(errors)]}


def test_each_domain_pools_its_own_utterances_and_pairs_them():
    domain = {f"u{i}": ("digits" if i < 6 else "spontaneous") for i in range(12)}
    ref = _row("offline", [0] * 6 + [1] * 6)
    sys_ = _row("two-pass", [0] * 6 + [3] * 6)
    got = by_domain([ref, sys_], domain, reference="offline")
    assert list(got) == ["digits", "spontaneous"]
    assert got["digits"]["words"] == 24 and got["digits"]["utterances"] == 6
    assert got["digits"]["wer"] == {"offline": 0.0, "two-pass": 0.0}
    assert got["spontaneous"]["wer"] == {"offline": 0.25, "two-pass": 0.75}
    # every spontaneous utterance is 2 errors worse: the paired interval is that, exactly
    assert got["spontaneous"]["vs_reference"]["two-pass"] == {"diff": 0.5, "ci95": [0.5, 0.5], "verdict": "worse"}
    assert got["digits"]["vs_reference"]["two-pass"]["verdict"] == "not separable"
    table = markdown(got, "offline")
    assert "| spontaneous | 6 | 24 | 25.0 % | 75.0 % (+50.0 [+50.0, +50.0]) |" in table


def test_a_single_utterance_domain_has_no_interval_and_an_unknown_one_is_refused():
    domain = {"u0": "a", "u1": "a", "u2": "b"}
    got = by_domain([_row("x", [1, 0, 2]), _row("y", [0, 0, 2])], domain, reference="x")
    assert all(math.isnan(v) for v in got["b"]["vs_reference"]["y"]["ci95"])
    with pytest.raises(ValueError, match="no domain"):
        by_domain([_row("x", [1, 0, 2])], {"u0": "a"})
