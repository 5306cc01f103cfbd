"""Live serving under load: how many real-time streams one 2-core machine serves, ours next to WhisperLiveKit's.

Our server (``serving.app``: Ray Serve, the tuned tiny.en 300 ms adapter registered in a local MLflow
registry) and the WhisperLiveKit server (``whisperlivekit-server`` from PyPI, same tiny.en weights, LocalAgreement
and SimulStreaming backends, ``--pcm-input``) are each driven by the same load generator: at level N, N clients
each stream the same held-out ``test`` utterances (every other one of the split: both corpora, several speakers)
once, back to back, in real time (100 ms PCM16 frames sent at their audio time, a new connection per utterance),
client k starting k/N of the way through the list.

Per word (a reference word of the forced alignment that the transcript got right), measured at the client:
  - ``first``: when the word was first shown (partial or final) − the time its end was spoken (sent);
  - ``final``: when it was committed (never to change again) − the same.
The model itself waits for a word's end and a margin before committing it (~1.1 s median at 300 ms for our
adapter, with one stream), so the load criterion is on what serving *adds*: a word's final latency at N streams
minus the same word's at N = 1 (the N = 1 level is the baseline). ``max_realtime_streams`` is the largest N at
which every stream's added final-word latency p95 is ≤ ``ADDED_P95_MS`` (1 s), no utterance's transcript ends more
than ``TAIL_MS`` after its audio (a stream that falls behind builds a backlog there), and no connection fails.
Absolute latencies (and WER: a system that drops words must not look fast) are reported at every N.

Soak (``--soak-min``): ``--soak-streams`` clients stream with reconnects for that long; the replica's RSS is
sampled every minute; every error is counted.

Writes ``benchmarks/results/serve_load.json`` / ``.md`` (the soak: ``serve_soak.json`` / ``.md``).
Usage: python -m benchmarks.serve_load (--model models:/NAME@ALIAS --tracking-uri URI | --adapter DIR)
       [--levels 1,2,4,8,12,16] [--peers] [--peer-levels 1,2,3]
       [--soak-min 30 --soak-streams 4] [--out outputs/bench-evaluation]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import ray
import whisper
from ray import serve

from benchmarks.common import markdown_table, write_results
from benchmarks.load_client import (FRAME_MS, Stream, pcm16, run_level, run_upload_level, stream_ours, stream_wlk,
                                    word_times)
from data.tracking import client
from evaluation.intervals import compare
from evaluation.metrics import utterance_counts
from evaluation.metrics.emission import word_emission_latencies
from evaluation.metrics.wer import wer
from evaluation.peers import _ct2_dir, _decoder_checkpoint
from evaluation.repetition import summary as repetition_summary
from evaluation.repetition import utterance_repetition
from evaluation.sets import describe, load_split
from recognizer.registry import parse_model_uri
from serving.app import ServeSettings, run
from serving.models import resolve
from training.causal.run import register_adapter

ADDED_P95_MS = 1000.0
TAIL_MS = 3000.0


def _pct(values, q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if len(values) else None


def stream_latencies(s: Stream, by_id: dict) -> dict[str, dict[int, float]]:
    """{"first"|"final": {reference word index: latency ms}} of one utterance's correctly recognised words."""
    first, final = word_times(s.snapshots)
    ref = by_id[s.utt_id].words
    return {"first": {w.ref_index: w.latency_ms for w in word_emission_latencies(first, ref)},
            "final": {w.ref_index: w.latency_ms for w in word_emission_latencies(final, ref)}}


def level_summary(clients: list[list[Stream]], by_id: dict, cpu: float,
                  baseline: dict[tuple[str, int], dict[str, float]] | None) -> tuple[dict, dict]:
    """The level's row, and {(utterance, reference word): {"first", "final"}} (the N=1 level is the baseline the
    others' *added* latency is measured against: the same word of the same utterance served alone)."""
    per_stream, pooled, delays, errors, refs, hyps = [], {"first": [], "final": []}, [], 0, [], []
    repetition = []  # every stream's finals at this level, not only N = 1's: load must not make a server repeat
    words: dict[tuple[str, int], dict[str, float]] = {}
    utterances = []  # N = 1 only: each utterance's transcript, for paired intervals between the servers
    for streams in clients:
        added = {"first": [], "final": []}
        tails = []
        for s in streams:
            lat = None if s.error else stream_latencies(s, by_id)
            if baseline is None:
                utterances.append(utterance_row(s, by_id, lat))
            if lat is None:
                errors += 1
                continue
            refs.append(by_id[s.utt_id].reference)
            hyps.append(transcript(s))
            repetition.append(utterance_repetition(hyps[-1], refs[-1]) | {"hyp": hyps[-1]})
            for kind in ("first", "final"):
                pooled[kind] += list(lat[kind].values())
                for i, v in lat[kind].items():
                    words.setdefault((s.utt_id, i), {})[kind] = v
                    base = (baseline or {}).get((s.utt_id, i), {}).get(kind)
                    if base is not None:
                        added[kind].append(v - base)
            if s.done_ms is not None:
                tails.append(s.done_ms - s.audio_ms)
            delays += s.server_delay_ms
        p95_added = _pct(added["final"], 95)
        behind = any(t > TAIL_MS for t in tails)
        per_stream.append({"utterances": len(streams), "added_first_p95_ms": _pct(added["first"], 95),
                           "added_final_p95_ms": p95_added, "tail_max_ms": round(max(tails), 1) if tails else None,
                           "behind": behind,
                           "ok": not behind and (baseline is None or (p95_added is not None and p95_added <= ADDED_P95_MS))})
    row = {"streams": len(clients), "utterances": sum(len(c) for c in clients), "errors": errors,
           "wer": round(wer(refs, hyps), 4) if refs else None,
           "first_ms": {"p50": _pct(pooled["first"], 50), "p95": _pct(pooled["first"], 95)},
           "final_ms": {"p50": _pct(pooled["final"], 50), "p95": _pct(pooled["final"], 95)},
           "added_final_p95_ms_worst_stream": max((p["added_final_p95_ms"] or 0.0) for p in per_stream),
           "server_delay_ms": {"p50": _pct(delays, 50), "p95": _pct(delays, 95)} if delays else None,
           **repetition_summary(repetition),
           "cpu_percent": round(cpu, 1), "realtime_ok": not errors and all(p["ok"] for p in per_stream),
           "per_stream": per_stream}
    if baseline is None:
        row["per_utterance"] = utterances
    return row, words


def transcript(s: Stream) -> str:
    """The words the client held when the stream ended."""
    return " ".join(s.snapshots[-1][1] + s.snapshots[-1][2]) if s.snapshots else ""


def utterance_row(s: Stream, by_id: dict, lat: dict[str, dict[int, float]] | None) -> dict:
    """One utterance at N = 1 as ``evaluation.intervals.compare`` reads it (``lat``: its
    :func:`stream_latencies`, None for a failed stream, which counts every reference word as lost and stays in
    the pairing)."""
    hyp = "" if lat is None else transcript(s)
    counts = utterance_counts([by_id[s.utt_id].reference], [hyp])[0]
    final = [] if lat is None else list(lat["final"].values())
    return {"utt_id": s.utt_id, "ref_words": counts.ref_words, "errors": counts.errors, "hyp": hyp,
            **utterance_repetition(hyp, by_id[s.utt_id].reference), "error": s.error, "word_latency_ms": final,
            "compute_ms": 0.0, "audio_ms": s.audio_ms}


def wer_vs(system: dict, reference: dict) -> dict:
    """``system``'s WER minus ``reference``'s at N = 1 on the same utterances: paired 95 % bootstrap interval."""
    out = compare(system["levels"][0]["per_utterance"], reference["levels"][0]["per_utterance"], "wer")
    return {"diff": round(out["diff"], 4), "ci95": [round(x, 4) for x in out["ci95"]], "verdict": out["verdict"]}


def _cpu_times() -> tuple[float, float]:
    fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(fields), fields[3] + fields[4]  # total, idle + iowait


def sweep(name: str, client, url: str, utterances, levels) -> dict:
    by_id = {u.utt_id: u for u in utterances}
    rows, baseline = [], None
    for n in sorted(set([1, *levels])):
        t_total, t_idle = _cpu_times()
        clients = asyncio.run(run_level(client, url, utterances, n))
        t_total2, t_idle2 = _cpu_times()
        cpu = 100.0 * (1 - (t_idle2 - t_idle) / max(1e-9, t_total2 - t_total))
        row, words = level_summary(clients, by_id, cpu, baseline)
        baseline = baseline or words
        rows.append({"n": n, **row})
        print(f"{name} N={n}: WER {row['wer']} first {row['first_ms']} final {row['final_ms']} added final p95 "
              f"(worst stream) {row['added_final_p95_ms_worst_stream']} cpu {row['cpu_percent']} % errors "
              f"{row['errors']} ok={row['realtime_ok']}", flush=True)
        if len(rows) >= 2 and not rows[-1]["realtime_ok"] and not rows[-2]["realtime_ok"]:
            break  # two failing levels in a row: more streams will not pass
    passing = [r["n"] for r in rows if r["realtime_ok"]]
    return {"system": name, "levels": rows, "max_realtime_streams": max(passing) if passing else 0}


# ------------------------------------------------------------------------- servers
def start_ours(out: Path, port: int, args, **settings_overrides) -> tuple[str, dict]:
    """Ray Serve on the registered recognizer ``--model`` (as `serve-model` serves it), or on ``--adapter``
    registered into a local registry (the older adapter versions); ``settings_overrides``: ``ServeSettings`` fields
    (default here: no per-client limits, since every load client is this process on 127.0.0.1)."""
    if args.model:
        uri = args.tracking_uri
        name, alias, version = parse_model_uri(args.model)
        if alias is None:
            alias = "serve-load"
            client(uri).set_registered_model_alias(name, alias, version)
    else:
        uri = f"sqlite:///{out / 'serve-load-mlflow.db'}"
        name, version = register_adapter(uri, args.adapter, "serve-load")
        alias = "serve-load"
        client(uri).set_registered_model_alias(name, alias, version)
    served = resolve(uri, name, alias)
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    settings = ServeSettings(**{"tracking_uri": uri, "registered_model": name, "alias": alias,
                                "max_streams": args.max_streams, "compute_threads": args.compute_threads,
                                "torch_threads": 1, "poll_s": 30.0, "max_per_client": 0, "connects_per_minute": 0,
                                **settings_overrides})
    url = run(settings, port, num_cpus=os.cpu_count())
    # the precision the replica resolved on this machine (what it asked for, what runs, why) and the CPU it ran on
    described = json.loads(urllib.request.urlopen(f"{url}/version", timeout=60).read())
    return url, {"registered_model": name, "version": served.version, "alias": alias, "kind": served.kind,
                 "settings": settings.public(),
                 **{k: described.get(k) for k in ("precision", "precision_requested", "precision_reason", "cpu")}}


def peer_setting(policy: str, chunk_ms: int = 300,
                 choices: Path = Path(__file__).resolve().parent / "results" / "selection" / "choices.json"
                 ) -> tuple[float, bool]:
    """(min chunk in s, VAC on?) of a whisperlivekit policy at a latency budget: the configuration chosen on dev by
    `benchmarks/evaluation.py select` (its best real-time setting), or 0.3 s without VAC when there is no choice."""
    kind = {"localagreement": "whisperlivekit-la", "simulstreaming": "whisperlivekit-simul"}[policy]
    if choices.exists():
        peer = json.loads(choices.read_text()).get("peers", {}).get(f"{kind}@{chunk_ms}")
        if peer:
            return peer["chunk_ms"] / 1000, bool(peer["vac"])
    return chunk_ms / 1000, False


def start_wlk(policy: str, port: int, log: Path, budget_ms: int = 300) -> tuple[str, subprocess.Popen]:
    exe = Path(sys.executable).parent / "whisperlivekit-server"
    min_chunk_s, vac = peer_setting(policy, budget_ms)
    cmd = [str(exe), "--host", "127.0.0.1", "--port", str(port), "--backend", "faster-whisper",
           "--backend-policy", policy, "--lan", "en", "--pcm-input", "--min-chunk-size", str(min_chunk_s),
           "--warmup-file", "", *([] if vac else ["--no-vac"])]
    if policy == "simulstreaming":  # as evaluation.peers: CTranslate2 encoder, openai-whisper decoder

        cmd += ["--encoder-model-path", str(_ct2_dir("tiny.en")),
                "--decoder-model-path", str(_decoder_checkpoint("tiny.en")),
                # a checkpoint under a custom path gets no heads from whisperlivekit (it looks them up by name)
                "--custom-alignment-heads", whisper._ALIGNMENT_HEADS["tiny.en"].decode()]  # noqa: SLF001
    else:
        cmd += ["--model_dir", str(_ct2_dir("tiny.en"))]
    proc = subprocess.Popen(cmd, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(os.cpu_count())})
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"whisperlivekit-server exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"{url}/health", timeout=5)
            return url, proc
        except OSError:
            time.sleep(1)
    proc.kill()
    raise RuntimeError(f"whisperlivekit-server did not answer: {log.read_text()[-2000:]}")


def soak(url: str, utterances, n: int, minutes: float) -> dict:
    """``n`` clients with reconnects for ``minutes``; the replica's RSS every minute."""

    def health() -> dict:
        with urllib.request.urlopen(f"{url}/healthz", timeout=10) as r:
            return json.loads(r.read())

    samples = [{"t_min": 0.0, "rss_mb": health()["rss_mb"]}]
    started = time.monotonic()
    results: list[list[Stream]] = [[] for _ in range(n)]

    async def main() -> None:
        deadline = started + minutes * 60

        async def sampler() -> None:
            while time.monotonic() < deadline:
                await asyncio.sleep(60)
                h = await asyncio.to_thread(health)
                samples.append({"t_min": round((time.monotonic() - started) / 60, 2), "rss_mb": h["rss_mb"]})

        async def client(k: int) -> None:
            i = k * 7
            while time.monotonic() < deadline:
                utt = utterances[i % len(utterances)]
                try:
                    results[k].append(await stream_ours(url, utt, pcm16(utt.audio)))
                except Exception as err:
                    results[k].append(Stream(utt.utt_id, 0, error=f"{type(err).__name__}: {err}"))
                i += 1

        await asyncio.gather(sampler(), *(client(k) for k in range(n)))

    asyncio.run(main())
    streams = [s for r in results for s in r]
    errors = [s.error for s in streams if s.error]
    return {"minutes": minutes, "streams": n, "utterances": len(streams), "errors": len(errors),
            "error_examples": errors[:5], "rss_mb": samples, "rss_start_mb": samples[0]["rss_mb"],
            "rss_end_mb": samples[-1]["rss_mb"], "audio_h": round(sum(s.audio_ms for s in streams) / 3.6e6, 3)}


def table(result: dict) -> str:
    lines = [f"Held-out test split: {result['test_set']['n_utterances']} utterances, streamed in real time in "
             f"{FRAME_MS} ms PCM16 frames; at each level N every client streams the same "
             f"{result['utterances_per_stream']} utterances ({result['seconds_per_stream']} s); "
             f"{result['machine_cpus']} CPUs. `added` = final-word latency minus the same word's at N = 1.", ""]
    header = ["system", "N", "WER", "repeated words (utts) / loops", "first p50 / p95 ms", "final p50 / p95 ms",
              "added final p95 (worst stream) ms", "server delay p50 / p95 ms", "CPU %", "errors", "real time"]
    rows = []
    for sys_ in result["systems"]:
        for r in sys_["levels"]:
            d = r["server_delay_ms"]
            rows.append([sys_["system"], r["n"], f"{100 * r['wer']:.1f} %" if r["wer"] is not None else "–",
                         f"{r.get('repeated_words', '–')} ({r.get('utterances_with_repeats', '–')}) / "
                         f"{r.get('token_loops', '–')}",
                         f"{r['first_ms']['p50']} / {r['first_ms']['p95']}",
                         f"{r['final_ms']['p50']} / {r['final_ms']['p95']}", r["added_final_p95_ms_worst_stream"],
                         f"{d['p50']} / {d['p95']}" if d else "–", r["cpu_percent"], r["errors"],
                         "yes" if r["realtime_ok"] else "no"])
    lines.append(markdown_table(header, rows))
    if result.get("uploads"):
        lines += ["", "## Whole files: /transcribe and OpenAI's route (same files, same server)", "",
                  upload_table(result["uploads"])]
    lines += ["", "## max_realtime_streams", ""]
    lines += [f"- {s['system']}: {s['max_realtime_streams']}" for s in result["systems"]]
    paired = [s for s in result["systems"] if "wer_minus_ours_at_n1" in s]
    if paired:
        lines += ["", "## WER at N = 1, paired with ours (95 % bootstrap over utterances)", ""]
        for s in paired:
            d = s["wer_minus_ours_at_n1"]
            lines.append(f"- {s['system']} − {result['systems'][0]['system']}: {100 * d['diff']:+.1f} points "
                         f"[{100 * d['ci95'][0]:+.1f}, {100 * d['ci95'][1]:+.1f}] ({d['verdict']})")
    return "\n".join(lines)


def upload_sweep(url: str, test, levels: list[int]) -> list[dict]:
    """Per level and route: request time median / p95 (and the first delta's for stream=true), errors, and the
    OpenAI routes' paired overhead over /transcribe on the same files (median difference, 95 % bootstrap)."""
    rows = []
    for n in levels:
        runs = {route: [r for client in asyncio.run(run_upload_level(url, test, n, route)) for r in client]
                for route in ("native", "openai", "openai-stream")}
        native = {r["utt_id"]: r for r in runs["native"] if "error" not in r}
        for route, results in runs.items():
            ok = [r for r in results if "error" not in r]
            row = {"n": n, "route": route, "requests": len(results), "errors": len(results) - len(ok),
                   "done_ms": _quantiles([r["done_ms"] for r in ok]),
                   "same_text_as_native": sum(r["text"] == native[r["utt_id"]]["text"] for r in ok
                                              if r["utt_id"] in native)}
            if route == "openai-stream":
                row["first_delta_ms"] = _quantiles([r["first_ms"] for r in ok if r.get("first_ms") is not None])
            if route != "native":
                diffs = [r["done_ms"] - native[r["utt_id"]]["done_ms"] for r in ok if r["utt_id"] in native]
                row["overhead_ms"] = _median_ci(diffs)
            rows.append(row)
    return rows


def _quantiles(values: list[float]) -> dict:
    return {"p50": round(float(np.percentile(values, 50)), 1), "p95": round(float(np.percentile(values, 95)), 1)
            } if values else {}


def _median_ci(values: list[float], n_resamples: int = 2000) -> dict:
    """The median of paired differences with a 95 % percentile-bootstrap interval."""
    x = np.asarray(values)
    boot = np.median(np.random.default_rng(0).choice(x, (n_resamples, len(x))), axis=1)
    return {"median": round(float(np.median(x)), 1),
            "ci95": [round(float(np.percentile(boot, 2.5)), 1), round(float(np.percentile(boot, 97.5)), 1)]}


def upload_table(rows: list[dict]) -> str:
    return markdown_table(
        ["N", "route", "requests", "errors", "done p50 / p95 ms", "first delta p50 / p95 ms",
         "overhead vs /transcribe (median [95 %]) ms", "same transcript"],
        [[r["n"], r["route"], r["requests"], r["errors"], f"{r['done_ms'].get('p50')} / {r['done_ms'].get('p95')}",
          f"{r['first_delta_ms']['p50']} / {r['first_delta_ms']['p95']}" if r.get("first_delta_ms") else "–",
          f"{r['overhead_ms']['median']:+.1f} [{r['overhead_ms']['ci95'][0]:+.1f}, {r['overhead_ms']['ci95'][1]:+.1f}]"
          if r.get("overhead_ms") else "–", r["same_text_as_native"]] for r in rows])


def soak_table(s: dict) -> str:
    lines = [f"Soak: {s['minutes']} min, {s['streams']} real-time streams with a reconnect per utterance, "
             f"{s['utterances']} utterances ({s['audio_h']} h of audio): {s['errors']} errors; replica RSS "
             f"{s['rss_start_mb']} MB at the start, {s['rss_end_mb']} MB at the end.", "",
             markdown_table(["minute", "replica RSS MB"], [[r["t_min"], r["rss_mb"]] for r in s["rss_mb"]])]
    if s["error_examples"]:
        lines += ["", "Errors:", *(f"- {e}" for e in s["error_examples"])]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a registered recognizer, models:/NAME@ALIAS or models:/NAME/VERSION")
    parser.add_argument("--tracking-uri", help="the registry of --model")
    parser.add_argument("--adapter", help="or: a tuned adapter, registered into a local registry and served")
    parser.add_argument("--out", default="outputs/bench-evaluation", help="where benchmarks/evaluation.py built data "
                        "(its state.json names the real-speech dataset version)")
    parser.add_argument("--levels", default="1,2,4,8,12,16")
    parser.add_argument("--every", type=int, default=2, help="every k-th test utterance is streamed")
    parser.add_argument("--max-streams", type=int, default=32)
    parser.add_argument("--compute-threads", type=int, default=2)
    parser.add_argument("--peers", action="store_true", help="also whisperlivekit-server (LocalAgreement, Simul)")
    parser.add_argument("--peer-levels", default="1,2,4")
    parser.add_argument("--peer-budget-ms", type=int, default=1000, help="the latency budget whose dev-chosen peer "
                        "configuration (choices.json) each whisperlivekit-server runs")
    parser.add_argument("--soak-min", type=float, default=0.0)
    parser.add_argument("--soak-streams", type=int, default=4)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--results-name", default="serve_load", help="benchmarks/results/<this>.json / .md")
    parser.add_argument("--upload-levels", default="", help="also whole files at these concurrencies through "
                        "/transcribe and OpenAI's /v1/audio/transcriptions (json and stream=true), e.g. 1,2")
    args = parser.parse_args()


    started = time.perf_counter()
    out = Path(args.out).resolve()
    if bool(args.model) == bool(args.adapter):
        raise SystemExit("give --model models:/NAME@ALIAS (with --tracking-uri) or --adapter DIR")
    # the evaluation's real-speech dataset version (benchmarks/evaluation.py data): its held-out test split
    real = json.loads((out / "state.json").read_text())["datasets"]["real"]
    test = load_split([real], ["test"])
    levels = [int(x) for x in args.levels.split(",") if x]
    test = test[:: args.every]
    result: dict = {"test_set": describe([real], ["test"], test), "machine_cpus": os.cpu_count(), "frame_ms": FRAME_MS,
                    "utterances_per_stream": len(test), "seconds_per_stream": round(sum(len(u.audio) for u in test) / 16000, 1),
                    "criteria": {"added_final_p95_ms": ADDED_P95_MS, "tail_ms": TAIL_MS}}
    url, served = start_ours(out, args.port, args)
    result["served"] = served

    if args.soak_min:  # its own run and its own results file
        result["soak"] = soak(url, test, args.soak_streams, args.soak_min)
        serve.shutdown()
        result["wall_s"] = round(time.perf_counter() - started, 1)
        result["command"] = " ".join(["python", *sys.argv])
        write_results("serve_soak", result, soak_table(result["soak"]))
        return
    label = f"whisperline (Ray Serve) {served['kind']} {served['registered_model']} v{served['version']}"
    systems = [sweep(label, stream_ours, url, test, levels)] if levels else []
    if args.upload_levels:  # the same files through /transcribe and OpenAI's route, same server, same run
        result["uploads"] = upload_sweep(url, test, [int(x) for x in args.upload_levels.split(",")])
    serve.shutdown()
    if args.peers:
        for policy in ("localagreement", "simulstreaming"):
            port = args.port + 1
            wlk_url, proc = start_wlk(policy, port, out / f"wlk-{policy}.log", args.peer_budget_ms)
            try:
                chunk_s, vac = peer_setting(policy, args.peer_budget_ms)
                systems.append(sweep(f"whisperlivekit-server {policy} {chunk_s:g} s" + (" + VAC" if vac else ""),
                                     stream_wlk, wlk_url, test,
                                     [int(x) for x in args.peer_levels.split(",")]))
            finally:
                proc.terminate()
                proc.wait(30)
    result["systems"] = systems
    result["max_realtime_streams"] = systems[0]["max_realtime_streams"] if systems else None
    for s in systems[1:]:
        key = "la" if "localagreement" in s["system"] else "simul"
        result[f"max_realtime_streams_whisperlivekit_{key}"] = s["max_realtime_streams"]
        s["wer_minus_ours_at_n1"] = wer_vs(s, systems[0])
    result["wall_s"] = round(time.perf_counter() - started, 1)
    result["command"] = " ".join(["python", *sys.argv])
    write_results(args.results_name, result, table(result))


if __name__ == "__main__":
    main()
