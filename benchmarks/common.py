"""Helpers for benchmark scripts: machine info, result files, markdown tables."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def realspeech_path(arg: str | None = None) -> Path:
    root = Path(arg or os.environ.get("WHISPERLINE_REALSPEECH", "../shared/data/realspeech"))
    return root if root.is_absolute() else (Path(__file__).resolve().parent.parent / root).resolve()


def cpu_model() -> str:
    """The CPU's name (timings from different CPU models of one machine kind are not comparable)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent, check=False).stdout.strip()
    except OSError:
        commit = ""
    from streaming.precision import machine_info  # ISA flags, oneDNN cap, native bf16, torch and its threads

    return {**machine_info(), "cpus": os.cpu_count(), "cpu_model": cpu_model(), "platform": platform.platform(),
            "python": platform.python_version(), "git_commit": commit,
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def write_results(name: str, payload: dict, table: str) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({**payload, "machine": machine()}, indent=2, sort_keys=True) + "\n")
    (RESULTS / f"{name}.md").write_text(table + "\n")
    print(table)
    return path


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def served_spec(name: str, **fields):
    """The served two-pass spec (``selection/served_two_pass.json``, what ``whisperline registry register``
    registers) under ``name``, with ``fields`` set over it."""
    from evaluation.systems import SystemSpec

    served = json.loads((RESULTS / "selection" / "served_two_pass.json").read_text())
    return SystemSpec(**(served | fields | {"name": name}))


def selection_name(name: str, which: str) -> str:
    """A dev report's file stem under ``selection/``: ``name`` for the real dev split, ``name_synthetic`` for the
    synthetic dev set, ``name_streams`` for the continuous dev streams."""
    return name + ("" if which == "real" else f"_{which}")


def selection_result(name: str, which: str) -> dict:
    """The report :func:`score_served_arms` wrote for ``which`` ("real" or "synthetic")."""
    return json.loads((RESULTS / "selection" / f"{selection_name(name, which)}.json").read_text())


def score_served_arms(state: dict, which: str, arms: dict[str, dict], name: str) -> None:
    """Each arm (row name → fields set over the served spec, :func:`served_spec`) streamed over the `dev` split of
    the real corpus (``which`` "real", live feeding), the synthetic dev set ("synthetic", live feeding) or the
    continuous dev streams ("streams": each real dev speaker's utterances joined, ``benchmarks.longform.dev_streams``;
    fixed feeding, so the transcripts do not depend on the machine's speed), paired with the first arm; the report
    goes to ``selection/`` (:func:`selection_name`)."""
    import sys

    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split

    specs = [served_spec(row, **fields) for row, fields in arms.items()]
    dataset = state["datasets"]["kokoro_dev" if which == "synthetic" else "real"]
    if which == "streams":
        from benchmarks.longform import dev_streams

        units, test_set = dev_streams(state)
        result = evaluate_systems(specs, units, test_set=test_set, reference=specs[0].name, live=False)
    else:
        units = load_split([dataset], ["dev"])
        result = evaluate_systems(specs, units, test_set=describe([dataset], ["dev"], units), reference=specs[0].name)
    result["command"] = " ".join(["python", *sys.argv])
    result["dataset"] = Path(dataset).name
    write_report(result, RESULTS / "selection", selection_name(name, which))


def dev_choice_cli(doc: str, score, choose, prefix: str) -> None:
    """The command line of a dev choice between arms: ``--set real|synthetic|streams`` runs ``score(state, set)``,
    ``--choose`` writes ``choose()`` to ``selection/<prefix>_choice.json``."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--set", choices=("real", "synthetic", "streams"))
    parser.add_argument("--choose", action="store_true")
    args = parser.parse_args()
    if args.set:
        score(json.loads(Path(args.state).read_text()), args.set)
    if args.choose:
        choice = choose() | {"command": " ".join(["python", *sys.argv])}
        (RESULTS / "selection" / f"{prefix}_choice.json").write_text(json.dumps(choice, indent=1) + "\n")
        print(json.dumps(choice, indent=1))


def scored_sets(prefix: str, selection: Path) -> tuple[dict[str, dict[str, dict]], list[str]]:
    """({set: {row name: row}} of the dev reports written for ``prefix``, [sets not scored]); the continuous dev
    streams are required."""
    rows, missing = {}, []
    for which in ("real", "synthetic", "streams"):
        path = selection / f"{selection_name(prefix, which)}.json"
        if path.exists():
            rows[which] = {r["name"]: r for r in json.loads(path.read_text())["systems"]}
        else:
            missing.append(which)
    if "streams" not in rows:
        raise FileNotFoundError(f"score the continuous dev streams first: --set streams ({prefix})")
    return rows, missing


def pooled_over_seeds(per_seed: dict[int, list[dict]]) -> list[dict]:
    """One system's per-utterance results at several training seeds as one list of units (seed × utterance), each
    with ``recording`` = its utterance, so that ``intervals.ci95`` / ``compare`` with ``groups="recording"`` resample
    an utterance's seeds together: WER pooled over the seeds, paired by utterance with another system pooled the
    same way. Word latencies are left out (a median over pooled seeds is not a latency anyone sees)."""
    return [{**u, "utt_id": f"{u['utt_id']}#seed{s}", "recording": u["utt_id"], "word_latency_ms": []}
            for s in sorted(per_seed) for u in per_seed[s]]


def rule_text(doc: str) -> str:
    """The rule a dev-choice script's docstring wrote before its run (after "Rule, written before the run")."""
    return doc.split("Rule, written before the run", 1)[1].lstrip(": ").strip()


def _ci(rows: dict[str, dict], arm: str, reference: str, metric: str) -> list[float]:
    """The paired 95 % interval of ``arm``'s ``metric`` minus ``reference``'s over one dev set's rows (by name)."""
    from evaluation.intervals import compare

    return compare(rows[arm]["per_utterance"], rows[reference]["per_utterance"], metric)["ci95"]


def tail_choice(prefix: str, reference: str, arm: str, wer_margin: float,
                selection: Path = RESULTS / "selection") -> tuple[bool, dict]:
    """A setting judged on the tail of final-word latency, on dev (the rule ``restart_tail.py``, ``restart_whole.py``
    and ``restart_long.py`` write before their runs): (whether ``arm`` qualifies, the evidence). It qualifies when
    every dev set is scored and on each the upper end of the 95 % interval of its WER minus ``reference``'s is at
    most ``wer_margin`` (a fraction); its pooled p90 final-word latency is not separably higher on real dev or the
    continuous dev streams and separably lower on at least one of them; and its streams median final-word latency
    is not separably higher."""
    rows, missing = scored_sets(prefix, selection)
    wer = {which: _ci(r, arm, reference, "wer") for which, r in rows.items()}
    p90 = {which: _ci(rows[which], arm, reference, "word_latency_ms_p90") for which in ("real", "streams")
           if which in rows}
    median = _ci(rows["streams"], arm, reference, "word_latency_ms_median")
    qualifies = (not missing and all(ci[1] <= wer_margin for ci in wer.values())
                 and all(ci[0] <= 0 for ci in p90.values()) and any(ci[1] < 0 for ci in p90.values())
                 and median[0] <= 0)
    return qualifies, {
        "wer_margin": wer_margin,
        "wer": {which: {name: r[name]["wer"] for name in (reference, arm)} for which, r in rows.items()},
        "wer_vs_reference_ci95": wer,
        "word_latency_ms_p90": {which: {name: rows[which][name]["word_latency_ms_p90"] for name in (reference, arm)}
                                for which in p90},
        "p90_vs_reference_ci95": p90,
        "streams_word_latency_ms_median": {name: rows["streams"][name]["word_latency_ms_median"]
                                           for name in (reference, arm)},
        "streams_median_vs_reference_ci95": median, "sets_not_scored": missing}


def tail_choice_cli(doc: str, prefix: str, reference: str, arm: str, fields: dict, wer_margin: float, key: str,
                    chosen, kept) -> None:
    """The command line of a setting judged on the tail (``restart_tail.py``, ``restart_whole.py``,
    ``restart_long.py``): ``arm`` is the served spec with ``fields`` set over it, ``reference`` the served spec as it
    is; ``--choose`` writes ``{key: chosen}`` when :func:`tail_choice` qualifies the arm (``kept`` otherwise), the
    evidence and the rule ``doc`` wrote before the run."""

    def score(state: dict, which: str) -> None:
        score_served_arms(state, which, {reference: {}, arm: fields}, prefix)

    def choose() -> dict:
        qualifies, evidence = tail_choice(prefix, reference, arm, wer_margin)
        return {key: chosen if qualifies else kept, **evidence, "rule": rule_text(doc)}

    dev_choice_cli(doc, score, choose, prefix)


def latency_choice(prefix: str, reference: str, arms: dict[int, str], max_rtf: float,
                   selection: Path = RESULTS / "selection") -> dict:
    """A setting chosen for latency on dev (the rule ``heartbeat.py``, ``hold_last_edge.py`` and
    ``edge_heartbeat.py`` write before their runs): an arm qualifies when its WER is not separably higher than
    ``reference``'s on every set scored (real dev, synthetic dev, the continuous dev streams), its streams RTF is
    ≤ ``max_rtf`` and its streams median final-word latency is separably lower than the reference's. Of the
    qualifying, the one with the lowest streams latency, unless it is not separably sooner than a larger setting
    that qualifies: then the largest such (the cautious end). ``arms``: setting → row name. A set not scored is
    named in ``sets_not_scored`` (the streams are needed)."""
    rows, missing = scored_sets(prefix, selection)
    streams = rows["streams"]

    def sooner(a: str, b: str) -> list[float]:
        return _ci(streams, a, b, "word_latency_ms_median")

    chosen_arms: dict[str, dict] = {}
    for value, name in arms.items():
        wer = {which: _ci(r, name, reference, "wer") for which, r in rows.items()}
        latency = sooner(name, reference)
        chosen_arms[str(value)] = {
            "wer": {which: r[name]["wer"] for which, r in rows.items()}, "wer_vs_reference_ci95": wer,
            "streams_latency_ms_median": streams[name]["word_latency_ms_median"],
            "streams_latency_ms_p90": streams[name]["word_latency_ms_p90"],
            "streams_latency_vs_reference_ci95": latency, "streams_rtf": streams[name]["rtf"],
            "qualifies": all(ci[0] <= 0 for ci in wer.values()) and streams[name]["rtf"] <= max_rtf
            and latency[1] < 0}
    qualifying = sorted((v for v in arms if chosen_arms[str(v)]["qualifies"]),
                        key=lambda v: chosen_arms[str(v)]["streams_latency_ms_median"])
    chosen = qualifying[0] if qualifying else None
    for larger in sorted((v for v in qualifying if chosen is not None and v > chosen), reverse=True):
        if sooner(arms[chosen], arms[larger])[1] >= 0:
            chosen = larger
            break
    return {"chosen": chosen, "reference": {
        "name": reference, "wer": {which: r[reference]["wer"] for which, r in rows.items()},
        "streams_latency_ms_median": streams[reference]["word_latency_ms_median"],
        "streams_latency_ms_p90": streams[reference]["word_latency_ms_p90"], "streams_rtf": streams[reference]["rtf"]},
        "arms": chosen_arms, "sets_not_scored": missing}


def compute_choice(prefix: str, reference: str, arms: dict[str, str], wer_margin: float,
                   selection: Path = RESULTS / "selection") -> dict:
    """A setting chosen for compute on dev (the rule ``verifier_precision.py`` wrote before its run): an arm
    qualifies when, on each of real dev, synthetic dev and the continuous dev streams, the upper end of its WER
    difference to ``reference`` is at most ``wer_margin`` (a non-inferiority margin, as a fraction: "not separably
    worse" alone let a +1.1-point change through on 2026-11-29), its streams RTF is separably lower and its streams
    median final-word latency is not separably higher. Of the qualifying, the lowest streams RTF. Every set must
    be scored: an arm with a set missing does not qualify (``sets_not_scored``). ``arms``: setting → row name."""
    rows, missing = scored_sets(prefix, selection)
    streams = rows["streams"]
    out: dict[str, dict] = {}
    for value, name in arms.items():
        wer = {which: _ci(r, name, reference, "wer") for which, r in rows.items()}
        rtf = _ci(streams, name, reference, "rtf")
        latency = _ci(streams, name, reference, "word_latency_ms_median")
        out[value] = {"wer": {which: r[name]["wer"] for which, r in rows.items()}, "wer_vs_reference_ci95": wer,
                      "streams_rtf": streams[name]["rtf"], "streams_rtf_vs_reference_ci95": rtf,
                      "streams_latency_ms_median": streams[name]["word_latency_ms_median"],
                      "streams_latency_vs_reference_ci95": latency,
                      "qualifies": not missing and all(ci[1] <= wer_margin for ci in wer.values()) and rtf[1] < 0
                      and latency[0] <= 0}
    qualifying = sorted((v for v in arms if out[v]["qualifies"]), key=lambda v: out[v]["streams_rtf"])
    return {"chosen": qualifying[0] if qualifying else None, "wer_margin": wer_margin, "reference": {
        "name": reference, "wer": {which: r[reference]["wer"] for which, r in rows.items()},
        "streams_rtf": streams[reference]["rtf"],
        "streams_latency_ms_median": streams[reference]["word_latency_ms_median"]},
        "arms": out, "sets_not_scored": missing}


def latency_choice_cli(doc: str, prefix: str, reference: str, arms: dict[int, tuple[str, dict]], key: str,
                       max_rtf: float, **fixed) -> None:
    """The command line of a latency setting chosen on dev (``heartbeat.py``, ``hold_last_edge.py``,
    ``edge_heartbeat.py``): ``arms`` maps each setting to its row name and the fields it sets over the served spec
    (``reference``: the served spec as it is); ``--choose`` writes :func:`latency_choice` under ``key``, with
    ``fixed`` and the rule ``doc`` wrote before the run."""

    def score(state: dict, which: str) -> None:
        score_served_arms(state, which, {reference: {}} | dict(arms.values()), prefix)

    def choose() -> dict:
        choice = latency_choice(prefix, reference, {v: name for v, (name, _) in arms.items()}, max_rtf)
        return {key: choice.pop("chosen"), **fixed, **choice,
                "rule": rule_text(doc)}

    dev_choice_cli(doc, score, choose, prefix)
