"""One dev decision, run from a small declarative file: arms as overrides of the served spec, the dev sets, and the
rule written down before the run. Each arm's numbers become an MLflow run; the verdict becomes the decision record.

    python -m benchmarks.decide DECISION.yaml --real DATASET_VERSION_DIR [--adapter DIR] [--tracking-uri URI]
    # → MLflow experiment whisperline-decisions (a run per arm), docs/decisions/<name>.md (the record to commit)

A decision file::

    name: heartbeat-300
    question: Does a verifier pass every 300 ms of non-quiet audio make finals sooner at the same words?
    rule: >-
      Adopt the arm when its median final-word latency on the continuous dev streams is separably lower than the
      served spec's and, on every dev set, the upper end of its WER difference is at most 0.5 points.
    reference: served
    arms:
      served: {}
      heartbeat 300: {second_pass: {heartbeat_ms: 300}}
    sets: [real, streams]
    adopt: {better: word_latency_ms_median, set: streams, wer_margin: 0.005}

``sets``: ``real`` is the real `dev` split, live-fed; ``streams`` are its speakers' utterances joined into continuous
streams of 20-120 s and the long-form dev recordings whole, fed in fixed pieces. Test is never read, and no arm may
score an artifact (adapter, EMMA policy, hush word) trained on dev audio: the run stops first with ``LeakageError``.
``adopt``: an arm qualifies when the 95 % paired interval of its ``better`` metric minus the reference's lies wholly
below 0 on the ``set`` named and, on every set, its WER difference is not separably above 0 (``wer_margin`` given: its
upper end is at most that fraction), and for each ``guard`` metric the upper end of its difference on the ``set`` (or
the set named before a dot) is at most the bound given, in the metric's units (``guard: {display_latency_ms_median:
100}``: the shown words come at most 100 ms later; ``streams.word_latency_ms_median: 200``: the finals on the streams
at most 200 ms later); of the qualifying arms, the one with the lowest ``better`` there; none: the reference stays.

A recipe decision trains its arms: an arm's ``train`` (the datasets by their names in the release's
``state.json``, and finetune overrides over the ``profile``'s ``finetune:`` section) trains that arm's adapter once
per seed of ``seeds``, and the rule must hold at every seed::

    seeds: [1, 2]
    arms:
      synthetic: {kind: causal, train: {datasets: [synth, kokoro_train]}}
      real + synthetic: {kind: causal, train: {datasets: [synth, kokoro_train, l2]}}
      real 1/4 + synthetic: {kind: causal, train: {datasets: [synth, kokoro_train, l2],
                                                   dataset_fractions: {speechocean762: 0.25}}}
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmarks.longform import dev_streams
from configs.finetune import load_finetune_config
from data.provenance import check_artifacts_held_out
from data.tracking import client, default_tracking_uri, experiment_id
from evaluation.domains import by_domain
from evaluation.domains import markdown as domains_markdown
from evaluation.intervals import compare
from evaluation.sets import describe, load_split
from recognizer.evaluate import evaluate_systems
from recognizer.spec import artifact_dirs, load

REPO = Path(__file__).resolve().parent.parent
SETS = ("real", "streams")
EXPERIMENT = "whisperline-decisions"
METRICS = ("wer", "word_latency_ms_median", "word_latency_ms_p90", "rtf", "partial_rewrite_rate",
           "display_latency_ms_median")


@dataclass(frozen=True)
class Adopt:
    better: str = "wer"
    set: str = "real"  # (not "on": YAML reads a bare `on` as true)
    wer_margin: float | None = None
    no_domain_worse: bool = False  # also: on no domain (of the sets whose utterances have one) is it separably worse
    guard: dict[str, float] = field(default_factory=dict)  # [set.]metric: the largest upper end of arm − reference

    def guarded(self) -> dict[str, tuple[str, str]]:
        """Each guard key's (set, metric): a bare metric is on ``set``."""
        return {k: (k.rpartition(".")[0] or self.set, k.rpartition(".")[2]) for k in self.guard}


@dataclass(frozen=True)
class Decision:
    name: str
    question: str
    rule: str
    reference: str
    arms: dict[str, dict[str, Any]]
    sets: tuple[str, ...] = ("real",)
    adopt: Adopt = field(default_factory=Adopt)
    seeds: tuple[int, ...] = ()  # a recipe decision: each arm's adapter trained once per seed
    profile: str = "configs/smoke.yaml"  # whose finetune section the arms' ``train`` overrides

    @property
    def trains(self) -> bool:
        return any("train" in o for o in self.arms.values())


def spec_overrides(arm: dict[str, Any]) -> dict[str, Any]:
    """An arm's overrides of the served spec (its ``train`` apart)."""
    return {k: v for k, v in arm.items() if k != "train"}


def load_decision(path: str | Path) -> Decision:
    """The decision file, checked before anything runs: a reference among the arms, known sets and metric, and
    arms that are valid overrides of the served spec."""
    values = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    unknown = set(values) - {"name", "question", "rule", "reference", "arms", "sets", "adopt", "seeds", "profile"}
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}")
    d = Decision(**{**values, "sets": tuple(values.get("sets", ("real",))), "adopt": Adopt(**values.get("adopt", {})),
                    "seeds": tuple(values.get("seeds", ()))})
    if d.reference not in d.arms:
        raise ValueError(f"{path}: the reference {d.reference!r} is not among the arms {sorted(d.arms)}")
    if len(d.arms) < 2 or not set(d.sets) <= set(SETS) or d.adopt.set not in d.sets:
        raise ValueError(f"{path}: need two arms or more, sets among {SETS} and adopt.set among them")
    guarded = d.adopt.guarded().values()
    if d.adopt.better not in METRICS or not all(m in METRICS and w in d.sets for w, m in guarded):
        raise ValueError(f"{path}: adopt.better and adopt.guard's metrics must be among {METRICS} (a guard's set among "
                         f"the sets), got {[d.adopt.better, *d.adopt.guard]}")
    for arm, overrides in d.arms.items():
        load(**spec_overrides(overrides))  # a field the spec does not have fails here, naming it
    if d.trains:
        if not d.seeds or not all("datasets" in (o.get("train") or {}) for o in d.arms.values()):
            raise ValueError(f"{path}: a recipe decision needs seeds and a train.datasets list in every arm")
        for o in d.arms.values():  # a finetune setting that does not exist fails here, naming it
            load_finetune_config(None, **{**o["train"], "datasets": ("checked",)})
    return d


def judge(d: Decision, rows: dict[str, dict[str, dict]]) -> dict[str, Any]:
    """The rule applied to per-set rows ({set: {arm: evaluation row}}): per arm its numbers and intervals against
    the reference, whether it qualifies; ``chosen``: the adopted arm (the reference where none qualifies)."""
    ref = d.reference

    def ci(which: str, arm: str, metric: str) -> list[float]:
        return compare(rows[which][arm]["per_utterance"], rows[which][ref]["per_utterance"], metric)["ci95"]

    domains = {which: by_domain(list(rows[which].values()), reference=ref) for which in d.sets
               if all("domain" in u for r in rows[which].values() for u in r["per_utterance"])}
    if d.adopt.no_domain_worse and d.adopt.set not in domains:  # (joined streams mix domains: judged on the rest)
        raise ValueError(f"adopt.no_domain_worse needs a domain on every utterance of {d.adopt.set!r}")
    arms: dict[str, dict] = {}
    for arm in d.arms:
        out = {which: {m: rows[which][arm].get(m) for m in METRICS} for which in d.sets}
        if arm != ref:
            wer = {which: ci(which, arm, "wer") for which in d.sets}
            better = ci(d.adopt.set, arm, d.adopt.better)
            wer_ok = all((c[1] <= d.adopt.wer_margin) if d.adopt.wer_margin is not None else c[0] <= 0
                         for c in wer.values())
            worse = sorted(f"{which}/{dom}" for which, per in domains.items() for dom, e in per.items()
                           if e["vs_reference"][arm]["ci95"][0] > 0)
            domain_ok = not (d.adopt.no_domain_worse and worse)
            guards = {k: ci(which, arm, m) for k, (which, m) in d.adopt.guarded().items()}
            guard_ok = all(guards[k][1] <= bound for k, bound in d.adopt.guard.items())
            out |= {"wer_vs_reference_ci95": wer, "better_vs_reference_ci95": better, "domains_worse": worse,
                    "guards_vs_reference_ci95": guards,
                    "qualifies": wer_ok and domain_ok and guard_ok and better[1] < 0}
        arms[arm] = out
    qualifying = [a for a in d.arms if arms[a].get("qualifies")]
    chosen = min(qualifying, key=lambda a: arms[a][d.adopt.set][d.adopt.better]) if qualifying else ref
    return {"chosen": chosen, "arms": arms, "domains": domains}


def judge_seeds(d: Decision, rows: dict[Any, dict[str, dict[str, dict]]]) -> dict[str, Any]:
    """:func:`judge` at each seed ({seed: {set: {arm: row}}}); ``chosen``: of the arms that qualify at every seed,
    the one with the lowest mean ``better`` (the reference where none does); ``pending`` while a seed of the
    decision has no rows yet (``pending_seeds``): the rule needs every seed. Unless no arm can qualify any more (each
    failed at a seed already run): then the reference stays whatever the other seeds say, and they are not run
    (``settled_without_seeds``)."""
    per = {seed: judge(d, r) for seed, r in rows.items()}
    missing = [s for s in d.seeds if s not in rows]
    failed = all(any(not v["arms"][a].get("qualifies") for v in per.values()) for a in d.arms if a != d.reference)
    if missing and per and failed:
        return {"chosen": d.reference, "settled_without_seeds": missing, "seeds": per}
    if missing:
        return {"chosen": "pending", "pending_seeds": missing, "seeds": per}
    every = [a for a in d.arms if a != d.reference and all(v["arms"][a].get("qualifies") for v in per.values())]
    chosen = min(every, key=lambda a: statistics.mean(v["arms"][a][d.adopt.set][d.adopt.better]
                                                      for v in per.values())) if every else d.reference
    return {"chosen": chosen, "seeds": per}


def train_arms(d: Decision, datasets: dict[str, str], dev: list[str], seed: int, tracking_uri: str,
               work: Path) -> dict[str, str]:
    """Each arm's adapter at ``seed``, trained on its ``train.datasets`` (names → version dirs), validated on the
    dev sets: {arm: adapter dir}. Run keys hash config, data and code: a finished arm is reused."""
    from training.causal.run import run_finetune  # lazy: pulls torch and Ray Train

    out = {}
    for arm, o in d.arms.items():
        train = dict(o["train"])
        names = train.pop("datasets")
        cfg = load_finetune_config(str(REPO / d.profile), **{"validation_limit": 16, **train},
                                   datasets=tuple(datasets[n] for n in names), validation_datasets=tuple(dev),
                                   seed=seed, tracking_uri=tracking_uri)
        cfg = cfg.model_copy(update={"experiment": f"{EXPERIMENT}-training", "output_dir": str(work / "adapters"),
                                     "storage_path": str(work / "ray")})
        out[arm] = run_finetune(cfg.for_chunk(load(**spec_overrides(o)).chunk_ms))["adapter_dir"]
    return out


def seed_rows(d: Decision, datasets: dict[str, str], real: list[str], seed: int, tracking_uri: str, work: Path,
              run: bool = True) -> dict[str, dict[str, dict]] | None:
    """One seed's scored rows ({set: {arm: row}}), kept under ``work/rows`` by decision, arms and dev sets: a
    decision run a seed at a time (one session's CPU) is judged once every seed has rows. ``run=False``: only
    what is kept (None where nothing is)."""
    key = hashlib.sha256(json.dumps([d.arms, d.sets, real], sort_keys=True).encode()).hexdigest()[:12]
    path = work / "rows" / f"{d.name}-{key}" / f"seed-{seed}.json"
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    if not run:
        return None
    rows = score(d, real, train_arms(d, datasets, real, seed, tracking_uri, work))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, default=str), encoding="utf-8")
    return rows


EMMA_PLACEHOLDER = "$EMMA"  # an arm's ``decoding.emma_dir``: the policy folder given as ``--emma`` at run time


def with_emma(arm: dict[str, Any], emma_dir: str | None) -> dict[str, Any]:
    """The arm's overrides with the ``$EMMA`` placeholder replaced by the policy folder (an error without one)."""
    decoding = arm.get("decoding") or {}
    if decoding.get("emma_dir") != EMMA_PLACEHOLDER:
        return arm
    if not emma_dir:
        raise SystemExit(f"an arm names the EMMA policy ({EMMA_PLACEHOLDER}): give --emma DIR")
    return {**arm, "decoding": {**decoding, "emma_dir": emma_dir}}


def score(d: Decision, real: list[str], adapters: dict[str, str | None], emma_dir: str | None = None,
          longform: str | None = None) -> dict[str, dict[str, dict]]:
    """Every arm (the served spec with its overrides, over its adapter) on each dev set: {set: {arm: row}}
    (``longform``: the long-form dataset version whose dev recordings join the continuous streams)."""
    specs = [load(**{**spec_overrides(with_emma(o, emma_dir)), "name": arm})
             .with_(weights={"adapter_dir": adapters[arm]}) for arm, o in d.arms.items()]
    # dev selects, so dev is held out from every artifact an arm scores (adapters, EMMA policies, hush words), as
    # test is from the release's: LeakageError naming the shared utterances (the continuous streams are dev's too)
    streams_from = [*real, longform] if longform and "streams" in d.sets else real
    check_artifacts_held_out(artifact_dirs(specs), streams_from, ["dev"], what="dev")
    rows = {}
    for which in d.sets:
        if which == "streams":
            units, test_set = dev_streams(real, longform)
            result = evaluate_systems(specs, units, test_set=test_set, reference=d.reference, live=False)
        else:
            units = load_split(real, ["dev"])
            result = evaluate_systems(specs, units, test_set=describe(real, ["dev"], units), reference=d.reference)
        rows[which] = {r["name"]: r for r in result["systems"]}
    return rows


def _per_seed(verdict: dict) -> dict[Any, dict]:
    """{seed: judge output}; a decision without seeds is one, under None."""
    return verdict.get("seeds") or {None: verdict}


def log_arms(d: Decision, verdict: dict, tracking_uri: str, commit: str) -> dict[str, str]:
    """One MLflow run per arm (its overrides as params, its numbers per set as metrics); {arm: run id}."""
    c = client(tracking_uri)
    exp = experiment_id(tracking_uri, EXPERIMENT)
    runs = {}
    for seed, v in _per_seed(verdict).items():
        for arm, numbers in v["arms"].items():
            key = arm if seed is None else f"{arm} (seed {seed})"
            run = c.create_run(exp, run_name=f"{d.name}: {key}", tags={
                "decision": d.name, "arm": arm, "seed": str(seed), "reference": str(arm == d.reference),
                "git_commit": commit, "chosen": str(arm == verdict["chosen"]), "rule": d.rule[:5000]})
            c.log_param(run.info.run_id, "overrides", json.dumps(d.arms[arm], sort_keys=True)[:6000])
            for which in d.sets:
                for metric, value in numbers[which].items():
                    if isinstance(value, (int, float)):
                        c.log_metric(run.info.run_id, f"{which}.{metric}", float(value))
                for domain, entry in v.get("domains", {}).get(which, {}).items():  # the curve per domain
                    c.log_metric(run.info.run_id, f"{which}.wer.{domain}", float(entry["wer"][arm]))
            c.set_terminated(run.info.run_id, "FINISHED")
            runs[key] = run.info.run_id
    return runs


def record(d: Decision, verdict: dict, commit: str) -> str:
    """The decision record (docs/decisions/): question, rule, arms, numbers with intervals, verdict, commit."""

    def pct(x: Any) -> str:
        return "" if x is None else f"{100 * x:.2f}"

    lines = [f"# {d.name}", "", f"**Question.** {d.question}", "", f"**Rule (written before the run).** {d.rule}",
             "", "**Arms** (overrides of `configs/recognizer.yaml`):", ""]
    lines += [f"- {arm}: `{json.dumps(o, sort_keys=True)}`" for arm, o in d.arms.items()]
    for seed, v in _per_seed(verdict).items():
        lines += ["", *([f"Seed {seed}:", ""] if seed is not None else []),
                  "| arm | set | WER % | WER − reference [95 %] | median / p90 latency ms | RTF |",
                  "|---|---|---|---|---|---|"]
        for arm, n in v["arms"].items():
            for which in d.sets:
                ci = n.get("wer_vs_reference_ci95", {}).get(which)
                lines.append(f"| {arm} | {which} | {pct(n[which]['wer'])} | "
                             f"{'' if ci is None else f'[{pct(ci[0])}, {pct(ci[1])}]'} | "
                             f"{n[which]['word_latency_ms_median']} / {n[which]['word_latency_ms_p90']} | "
                             f"{n[which]['rtf']} |")
        lines += ["", f"On {d.adopt.set}, {d.adopt.better}"
                  + "".join(f" and {m} (guard: at most {b} more)" for m, b in d.adopt.guard.items())
                  + ", each arm's value and its difference to the reference [95 %]:", ""]
        keys = [(d.adopt.better, (d.adopt.set, d.adopt.better)), *d.adopt.guarded().items()]
        for a, n in v["arms"].items():
            cis = {d.adopt.better: n.get("better_vs_reference_ci95"), **n.get("guards_vs_reference_ci95", {})}
            lines.append(f"- {a}: " + "; ".join(
                f"{k} {n[which].get(m)}" + ("" if cis.get(k) is None else f" {[round(x, 4) for x in cis[k]]}")
                for k, (which, m) in keys))
        for which, domains in v.get("domains", {}).items():
            lines += ["", f"Per domain ({which}):", "", domains_markdown(domains, d.reference).rstrip()]
    if verdict.get("pending_seeds"):
        outcome = f"pending: seed(s) {verdict['pending_seeds']} not run yet (the rule needs every seed)"
    else:
        outcome = verdict["chosen"] + (" (the reference stays)" if verdict["chosen"] == d.reference else " adopted")
        if verdict.get("settled_without_seeds"):
            outcome += (f": no arm qualified at seed(s) {sorted(verdict['seeds'])}, so seed(s) "
                        f"{verdict['settled_without_seeds']} could not change the verdict and were not run")
    lines += ["", f"**Verdict.** {outcome}", "", f"Commit: {commit}. Per-arm runs: MLflow experiment `{EXPERIMENT}`.",
              ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("decision", help="the decision file (YAML)")
    parser.add_argument("--real", nargs="+", help="the dev sets' dataset versions (their `dev` splits are used); "
                        "default: the state's real and l2 versions")
    parser.add_argument("--adapter", help="the causal adapter the arms run on (default: the original weights)")
    parser.add_argument("--emma", help=f"the EMMA policy folder of arms whose decoding.emma_dir is {EMMA_PLACEHOLDER} "
                        "(default: the state's artifacts.emma, benchmarks/emma_release.py)")
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json",
                        help="the release's state.json: the dataset versions a recipe decision's arms name")
    parser.add_argument("--seeds", type=int, nargs="+", help="a recipe decision: train and score only these of its "
                        "seeds now (the others' kept rows are used; judged once every seed has rows)")
    parser.add_argument("--tracking-uri", default=None)
    parser.add_argument("--out", default=str(REPO / "docs" / "decisions"), help="where the record is written")
    parser.add_argument("--evidence", default=str(REPO / "benchmarks" / "results" / "selection"),
                        help="where the verdict with every arm's numbers, intervals and domains is written (JSON)")
    args = parser.parse_args()

    d = load_decision(args.decision)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    uri = args.tracking_uri or default_tracking_uri()
    state = json.loads(Path(args.state).read_text()) if Path(args.state).exists() else {}
    datasets = state.get("datasets", {})
    emma_dir = args.emma or state.get("artifacts", {}).get("emma", {}).get("emma_dir")
    real = args.real or [datasets[k] for k in ("real", "l2") if k in datasets]
    if not real:
        raise SystemExit("no dev set: give --real DIR or a --state that names one")
    if d.trains:
        work = REPO / "outputs" / "decisions" / "recipes"  # shared: an arm another decision trained is reused
        run = set(args.seeds or d.seeds)
        rows = {seed: r for seed in d.seeds
                if (r := seed_rows(d, datasets, real, seed, uri, work, run=seed in run)) is not None}
        verdict = judge_seeds(d, rows)
    else:
        rows = score(d, real, dict.fromkeys(d.arms, args.adapter), emma_dir, datasets.get("longform"))
        kept = REPO / "outputs" / "decisions" / "rows" / f"{d.name}.json"  # every utterance's hypothesis, for a look
        kept.parent.mkdir(parents=True, exist_ok=True)                      # at what changed (never committed)
        kept.write_text(json.dumps(rows, default=str), encoding="utf-8")
        verdict = judge(d, rows)
    # a decision run a seed at a time logs its arms once, when every seed is in (a pending run would log the kept
    # seeds again at each invocation, and with a verdict they do not have yet)
    runs = {} if verdict.get("pending_seeds") else log_arms(d, verdict, uri, commit)
    path = Path(args.out) / f"{d.name}.md"
    path.write_text(record(d, verdict, commit), encoding="utf-8")
    evidence = Path(args.evidence) / f"{d.name}.json"
    evidence.write_text(json.dumps({"decision": d.name, "commit": commit, "dev_sets": real, "runs": runs,
                                    "verdict": verdict}, indent=1, default=str), encoding="utf-8")
    print(json.dumps({"chosen": verdict["chosen"], "record": str(path), "evidence": str(evidence), "runs": runs},
                     indent=1))


if __name__ == "__main__":
    main()
