"""Per-domain rows (evaluation/domains.py): pooled counts, intervals and paired differences per domain."""

from __future__ import annotations

import math

import pytest

from evaluation.domains import by_domain, domain_of, markdown


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
    lo, hi = got["spontaneous"]["ci95"]["offline"]
    assert lo == hi == 0.25  # every spontaneous utterance has 1 error in 4 words: no spread to resample
    table = markdown(got, "offline")
    assert table.splitlines()[0] == "| system | digits (6 utts, 24 words) | spontaneous (6 utts, 24 words) |"
    assert "| two-pass | 0.0 % [0.0, 0.0]; +0.0 [+0.0, +0.0] not separable | 75.0 % [75.0, 75.0]; +50.0 [+50.0, +50.0] worse |" in table


def test_domains_read_off_the_utterances_own_entries():
    rows = [_row("x", [1, 0, 2])]
    for u, d in zip(rows[0]["per_utterance"], ["l2", "l2", "read"]):
        u["domain"] = d
    got = by_domain(rows)
    assert {d: e["utterances"] for d, e in got.items()} == {"l2": 2, "read": 1} and "vs_reference" not in got["l2"]


def test_corpora_map_to_the_issue_domains():
    assert [domain_of(c) for c in ("librispeech", "speechocean762", "mfa", "fsdd", "an4", "ljspeech")] == [
        "read", "l2", "spontaneous", "commands", "commands", "read"]
    assert domain_of("armkit", "armkit_yes_no_go_stop") == "commands" and domain_of("armkit", "armkit_i_tell_you") == "read"
    assert domain_of("our_own_corpus") == "our_own_corpus"  # a team's corpus is its own domain


def test_a_single_utterance_domain_has_no_interval_and_an_unknown_one_is_refused():
    domain = {"u0": "a", "u1": "a", "u2": "b"}
    got = by_domain([_row("x", [1, 0, 2]), _row("y", [0, 0, 2])], domain, reference="x")
    assert all(math.isnan(v) for v in got["b"]["vs_reference"]["y"]["ci95"])
    with pytest.raises(ValueError, match="no domain"):
        by_domain([_row("x", [1, 0, 2])], {"u0": "a"})
