"""benchmarks/newcomer.sh's report: what its work folder holds, as benchmarks/results/newcomer.{json,md}.

    python benchmarks/newcomer_report.py WORK_DIR COMMIT LONGFORM_WAV

The bars (issue 64): the champion repeats no 4-gram its reference does not repeat, scores within 2 points of
offline faster-whisper on the held-out real speech, and is the same recognizer on every `make run`; served with
oneDNN capped at AVX2 it keeps up with a real-time long-form stream (RTF < 1, end lag < 1 s) at a median final-word
latency within 20 % of the native path's.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _json_tail(path: Path) -> dict:
    text = path.read_text()
    return json.loads(text[text.index("{"):])


def report(work: Path, commit: str, longform: str) -> dict:
    runs = [json.loads(line) for line in (work / "runs.jsonl").read_text().splitlines() if line.strip()]
    evaluation = json.loads((work / "eval-real" / "evaluation.json").read_text())
    rows = {r["name"]: r for r in evaluation["systems"]}
    # `evaluate --model` scores the registered spec under its own name beside the offline and peer rows
    champion = next(r for r in evaluation["systems"] if r["kind"] in ("two-pass", "causal"))
    fw = next(r for r in evaluation["systems"] if r["kind"] == "faster-whisper")
    keys = ("wer", "repeated_words", "utterances_with_repeats", "token_loops", "word_latency_ms_median",
            "word_latency_ms_p90", "rtf")
    served = {}
    # "native-bf16": the own-kernel stream again after a precision change (benchmarks/newcomer.sh leaves it out)
    for path in ("native", "native-bf16", "avx2"):
        stream, version = work / f"stream-{path}.json", work / f"version-{path}.json"
        if stream.exists() and stream.stat().st_size:
            served[path] = {**{k: v for k, v in _json_tail(stream).items() if k != "text"},
                            "precision": _json_tail(version).get("precision") if version.exists() else None,
                            "precision_reason": _json_tail(version).get("precision_reason")
                            if version.exists() else None}
    fw_path = work / "fw-longform.json"
    if fw_path.exists() and fw_path.stat().st_size:
        served["faster-whisper offline"] = {k: v for k, v in _json_tail(fw_path).items() if k != "text"}
    load = {}
    for path, name in (("native", "serve_load.json"), ("avx2", "serve_load_avx2.json")):
        if (RESULTS / name).exists():
            res = json.loads((RESULTS / name).read_text())
            load[path] = {"max_realtime_streams": res.get("max_realtime_streams"),
                          "precision": (res.get("served") or {}).get("precision"),
                          "machine_isa": (res.get("machine") or {}).get("onednn_max_cpu_isa"),
                          "isa_caps": (res.get("machine") or {}).get("isa_caps")}
    verdicts = {r["champion"]["name"] for r in runs}
    native, avx2 = served.get("native-bf16") or served.get("native"), served.get("avx2")
    bars = {}
    if native and avx2:
        ratio = avx2["final_latency_ms"]["median"] / native["final_latency_ms"]["median"]
        bars = {"avx2_keeps_up": avx2["rtf"] < 1 and avx2["end_lag_ms"] < 1000,
                "avx2_over_native_final_latency_median": round(ratio, 3), "avx2_latency_within_20pct": ratio <= 1.2}
    result = {
        "commit": commit, "date": time.strftime("%Y-%m-%d", time.gmtime()), "command": "bash benchmarks/newcomer.sh",
        "runs": runs, "same_champion_every_run": len(verdicts) == 1,
        "heldout_real": {"n_utterances": evaluation["test_set"].get("n_utterances"),
                         "systems": {name: {k: r.get(k) for k in keys} | {"ci95_wer": r.get("ci95", {}).get("wer")}
                                     for name, r in rows.items()}},
        "champion_minus_faster_whisper_points": round(100 * (champion["wer"] - fw["wer"]), 2),
        "longform_recording": Path(longform).stem, "served_longform": served, "serve_load": load,
        "served_bars": bars, "machine": evaluation.get("machine"),
    }
    return result


def markdown(r: dict) -> str:
    lines = [f"# The newcomer's path ({r['date']}, commit {r['commit']}; `{r['command']}`)", "",
             f"`make run` {len(r['runs'])}× from nothing: champion each run: "
             + "; ".join(f"{x['champion']['name']} v{x['champion']['version']} ({x['seconds']} s)" for x in r["runs"])
             + f" — same every run: {'yes' if r['same_champion_every_run'] else 'NO'}.", "",
             f"Held-out real speech ({r['heldout_real']['n_utterances']} utterances), the evaluate stage:", "",
             "| system | WER [95 % CI] | repeated words (utts) | loops | latency median / p90 | RTF |",
             "|---|---|---|---|---|---|"]
    for name, s in r["heldout_real"]["systems"].items():
        ci = s.get("ci95_wer") or [float("nan")] * 2
        lines.append(f"| {name} | {100 * s['wer']:.2f} % [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}] | "
                     f"{s.get('repeated_words')} ({s.get('utterances_with_repeats')}) | {s.get('token_loops')} | "
                     f"{s.get('word_latency_ms_median')} / {s.get('word_latency_ms_p90')} ms | {s.get('rtf')} |")
    lines += ["", f"Champion − offline faster-whisper: {r['champion_minus_faster_whisper_points']:+.2f} points.", "",
              f"Served, `{r['longform_recording']}` streamed in real time (`whisperline stream-file`):", "",
              "| kernels | precision | WER | repeated words | loop | RTF | end lag | final latency median / p90 |",
              "|---|---|---|---|---|---|---|---|"]
    for path, s in r["served_longform"].items():
        lat = s.get("final_latency_ms") or {}
        lines.append(f"| {path} | {s.get('precision')} | {100 * s.get('wer', float('nan')):.2f} % | "
                     f"{s.get('repeated_words')} | {s.get('token_loop')} | {s.get('rtf')} | {s.get('end_lag_ms')} ms | "
                     f"{lat.get('median')} / {lat.get('p90')} ms |")
    if b := r.get("served_bars"):
        lines += ["", f"AVX2 path keeps up (RTF < 1, end lag < 1 s): {'yes' if b['avx2_keeps_up'] else 'NO'}; its median "
                  f"final-word latency is {b['avx2_over_native_final_latency_median']:.2f}× the native path's (bar "
                  f"≤ 1.20: {'met' if b['avx2_latency_within_20pct'] else 'NOT met'})."]
    if r.get("serve_load"):
        lines += ["", "Served under load (`benchmarks/serve_load.py`, held-out real speech, real-time streams):", ""]
        lines += [f"- {path} kernels ({s.get('precision')}): max_realtime_streams {s.get('max_realtime_streams')}"
                  for path, s in r["serve_load"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    work, commit, longform = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    result = report(work, commit, longform)
    (RESULTS / "newcomer.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / "newcomer.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
