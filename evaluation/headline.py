"""The partials' headline numbers of a release report, read off its rows.

The rows are the test report's own (``evaluation.merge``): the served spec's causal pass alone (what a user sees
first), the served two-pass system (its finals), and the offline reference every WER is judged
against (faster-whisper, the offline system a user would otherwise run). Each WER carries its 95 % bootstrap
interval over utterances; the two-pass one also the paired interval of its difference from the offline reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaluation import intervals

# the served two-pass row: a new name whenever the served spec's finals change, as the test ledger counts scorings
# by name (the rows of earlier served specs stay in the report under their own names)
SERVED_ROW = "two-pass 300 ms (served: edge + heartbeat + whole restarts)"
# report key → the row it is read from (the names the release gives its rows)
CAUSAL_ROW = "causal tuned 300 ms"
ROWS = {"causal_only_tuned_300ms_wer": CAUSAL_ROW, "two_pass_300ms_wer": SERVED_ROW}
OFFLINE = "faster-whisper offline"


def _wer(row: Mapping[str, Any], seed: int, n_resamples: int) -> dict[str, Any]:
    lo, hi = intervals.ci95(row["per_utterance"], "wer", seed=seed, n_resamples=n_resamples)
    return {"value": row["wer"], "ci95": [round(lo, 5), round(hi, 5)], "row": row["name"]}


def partials_headline(rows: Sequence[Mapping[str, Any]], *, seed: int = 0,
                      n_resamples: int = intervals.N_RESAMPLES) -> dict[str, Any]:
    """The keys of :data:`ROWS` whose rows are present, ``offline_reference_wer``, the two-pass row's
    ``vs_offline_ci95`` (its WER minus the offline reference's, paired over utterances), its median / p90 final-word
    latency, and ``partial_rewrite_rate`` (the share of the words the served system showed as partials that it
    later changed). Raises KeyError when the offline reference is missing: nothing is judged without it."""
    by_name = {r["name"]: r for r in rows}
    offline = by_name.get(OFFLINE)
    if offline is None:
        raise KeyError(f"the report has no {OFFLINE!r} row: the partials are judged against it")
    out: dict[str, Any] = {"offline_reference_wer": _wer(offline, seed, n_resamples)}
    for key, name in ROWS.items():
        if name in by_name:
            out[key] = _wer(by_name[name], seed, n_resamples)
            out[key]["vs_offline_ratio"] = round(out[key]["value"] / offline["wer"], 4) if offline["wer"] else None
    two_pass = by_name.get(ROWS["two_pass_300ms_wer"])
    if two_pass is not None:
        diff = intervals.compare(two_pass["per_utterance"], offline["per_utterance"], "wer", seed=seed,
                                 n_resamples=n_resamples)
        out["two_pass_300ms_wer"].update({
            "vs_offline_ci95": [round(x, 5) for x in diff["ci95"]], "vs_offline_verdict": diff["verdict"],
            "word_latency_ms_median": two_pass.get("word_latency_ms_median"),
            "word_latency_ms_p90": two_pass.get("word_latency_ms_p90")})
        out["partial_rewrite_rate"] = two_pass.get("partial_rewrite_rate")
    return out
