"""Decisions the evidence can carry: data → train → select on dev → score the test split once.

    python -m benchmarks.evaluation data     # dataset versions (benchmarks/evidence.py)
    python -m benchmarks.evaluation train    # adapters (one per --seed), random-chunk adapter, hush word, EMMA
    python -m benchmarks.evaluation select   # every candidate on the dev sets → benchmarks/results/selection/
    python -m benchmarks.evaluation release  # the dev-chosen systems on `test` → benchmarks/results/evaluation.*

`train` trains, `dev` selects, `test` is only reported. `select` streams every candidate (ours with every seed,
decoding and threshold; each whisperlivekit policy at 300 / 500 / 1000 ms with and without its voice-activity
controller) over the real dev split and the synthetic dev set and writes the evidence and `choices.json`.
`release` reads `choices.json` only: the rows it scores on test were fixed before test was touched, and the scoring
appends a line to ``benchmarks/results/test_ledger.jsonl``. Every row carries per-utterance results and 95 % paired
bootstrap intervals; each comparison with the reference peer (LocalAgreement-2 at 1 s, its dev-chosen
configuration) is labelled better / worse / not separable. State between stages: ``<out>/state.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
SELECTION = RESULTS / "selection"
LEDGER = RESULTS / "test_ledger.jsonl"


def _state(out: Path) -> dict:
    path = out / "state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _save(out: Path, state: dict) -> None:
    (out / "state.json").write_text(json.dumps(state, indent=2) + "\n")


def stage_data(args, out: Path, state: dict) -> None:
    from benchmarks.evidence import build_datasets, dataset_counts

    only = tuple(d for d in args.datasets.split(",") if d)
    state["datasets"] = {**state.get("datasets", {}),
                         **build_datasets(out, Path(args.shared_data).resolve(), args.n_synth, only)}
    state["dataset_counts"] = {k: dataset_counts(v) for k, v in state["datasets"].items()}
    print(json.dumps(state["dataset_counts"], indent=1))


def _seeds(art: dict) -> list[int]:
    """The seeds of the trained 300 ms adapters (keys `300ms-seed<N>`), ascending."""
    return sorted(int(k.split("seed")[1]) for k in art.get("adapters", {}) if k.startswith("300ms-seed"))


def _seeds_scored(result: dict | None) -> list[int]:
    """The seeds whose 300 ms greedy rows a dev result holds: a later session re-chooses from the committed evidence
    (e.g. the peers alone) on a machine where the trained adapters are gone."""
    prefix = "causal tuned 300 ms seed "
    return sorted(int(r["name"][len(prefix):]) for r in (result or {}).get("systems", [])
                  if r["name"].startswith(prefix) and r["name"][len(prefix):].isdigit())


def _budgets(args) -> tuple[int, ...]:
    """``--budgets`` ("300,500,1000"; "" for none) as chunk sizes in ms."""
    return tuple(int(b) for b in args.budgets.split(",") if b.strip())


def _train_sets(state: dict) -> list[str]:
    return [state["datasets"][k] for k in ("synth", "kokoro_train") if k in state.get("datasets", {})]


def stage_train(args, out: Path, state: dict) -> None:
    from benchmarks.evidence import train_adapters, train_emma, train_hush

    train, real = _train_sets(state), state["datasets"]["real"]
    art = state.setdefault("artifacts", {})
    art["adapters"] = train_adapters(train, real, out, args.steps, args.seed, args.tracking, rcs=not args.no_rcs)
    _save(out, state)
    if not args.no_hush:
        art["hush_word"] = train_hush(train, real, out, args.hush_epochs, args.tracking)
        _save(out, state)
    if not args.no_emma:
        art["emma"] = train_emma(train, real, art["adapters"][f"300ms-seed{args.seed[0]}"]["adapter_dir"], out,
                                 args.emma_steps, args.tracking)


def _evaluate(specs, datasets, train, split, out_dir, args, **kw) -> dict:
    from flows.evaluate import evaluate

    return evaluate(specs, datasets, train, ["train"], split=split, out_dir=str(out_dir),
                    tracking_uri=args.tracking, repeats=args.repeats, **kw)


def stage_select(args, out: Path, state: dict) -> None:
    from benchmarks import selection as sel
    from evaluation.report import write_report

    art, train = state.get("artifacts", {}), _train_sets(state)
    seeds = _seeds(art)
    SELECTION.mkdir(parents=True, exist_ok=True)
    results = {}
    if "synthetic" in args.sets:
        syn = _evaluate(sel.synthetic_candidates(art, seeds), [state["datasets"]["kokoro_dev"]], train, "dev",
                        out / "select-synthetic", args, reference="offline Whisper (ours, 30 s pad)")
        write_report(syn, SELECTION, "synthetic_dev_systems")
        results["synthetic_dev"] = syn
    if "peers" in args.sets:  # needs no trained artifact: can run while training does (WERs do not depend on load)
        budgets = _budgets(args)
        name = "dev_peers_" + "_".join(map(str, budgets))  # one file per budget set: runs can be split
        peers = _evaluate(sel.peer_candidates(budgets), [state["datasets"]["real"]], train, "dev", out / name, args,
                          reference=sel.peer_name("whisperlivekit-la", max(budgets), False), stride=args.peer_stride)
        write_report(peers, SELECTION, name)
        results[f"real_dev_peers:{name}"] = peers
    if "real" in args.sets:
        candidates = sel.seed_candidates(art, seeds) if args.short_list else sel.ours_candidates(art, seeds)
        real = _evaluate(candidates, [state["datasets"]["real"]], train, "dev", out / "select-real", args)
        write_report(real, SELECTION, "dev_systems")
        results["real_dev"] = real
    _choose(state, results, seeds, args)


def _load_results() -> dict:
    out = {}
    for key, name in (("real_dev", "dev_systems"), ("synthetic_dev", "synthetic_dev_systems")):
        path = SELECTION / f"{name}.json"
        if path.exists():
            out[key] = json.loads(path.read_text())
    for path in sorted(SELECTION.glob("dev_peers_*.json")):  # peers' runs, each over its own budgets
        out[f"real_dev_peers:{path.stem}"] = json.loads(path.read_text())
    return out


def _choose(state: dict, results: dict, seeds: list[int], args) -> None:
    from benchmarks import selection as sel
    from recognizer.spec import from_dict

    results = {**_load_results(), **results}
    real = results.get("real_dev")
    seeds = seeds or _seeds_scored(real)
    choices = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "selected_on": "dev splits only",
               "evidence": {k: f"benchmarks/results/selection/{k.split(':')[-1] if ':' in k else n}.json"
                         for k, n in [("real_dev", "dev_systems"), ("synthetic_dev", "synthetic_dev_systems"),
                                      *[(k, "") for k in results if k.startswith("real_dev_peers")]]
                         if k in results}}
    choices["peers"] = {}
    for key in sorted(k for k in results if k.startswith("real_dev_peers")):
        choices["peers"].update(sel.choose_peers(results[key]))
    if real:
        first = f"causal tuned 300 ms seed {seeds[0]}"
        choices["champion"] = sel.choose_champion(real)
        choices["t_emma"] = sel.choose_t_emma(real)
        seed_rows = {s: next(r for r in real["systems"] if r["name"] == f"causal tuned 300 ms seed {s}") for s in seeds}
        best_seed = min(seeds, key=lambda s: seed_rows[s]["wer"])
        adapter = from_dict(seed_rows[best_seed]["spec"]).weights.adapter_dir  # rows of either spec schema
        choices["adapter"] = {"seed": best_seed, "adapter_dir": adapter,
                              "rule": "the seed of the 300 ms recipe with the lowest dev WER (greedy)",
                              "dev_wer_by_seed": {s: seed_rows[s]["wer"] for s in seeds}}
        names = {r["name"] for r in real["systems"]}
        pairs = {"beam_4_vs_greedy": (f"{first} beam 4", first), "reuse_vs_exact_cache": (f"{first} reuse cache", first),
                 "rcs_vs_tuned_300ms": ("causal random-chunk adapter 300 ms", first),
                 "two_pass_every_600_vs_300": ("two-pass 300 ms every 600 ms", "two-pass 300 ms every 300 ms"),
                 "two_pass_vs_causal_alone": ("two-pass 300 ms every 300 ms", first)}
        choices["decoding"] = {k: sel.pairwise(real, a, b) for k, (a, b) in pairs.items() if {a, b} <= names}
    choices["seeds"] = sel.seed_spread({k: v for k, v in results.items() if not k.startswith("real_dev_peers")},
                                       seeds)
    if "synthetic_dev" in results:
        syn = results["synthetic_dev"]
        names = {r["name"] for r in syn["systems"]}
        if "causal random-chunk adapter 300 ms" in names:
            choices["synthetic_rcs_vs_tuned"] = sel.pairwise(syn, "causal random-chunk adapter 300 ms",
                                                             f"causal tuned 300 ms seed {seeds[0]}")
    sel.write_choices(SELECTION / "choices.json", choices)
    print(json.dumps({k: choices[k] for k in ("champion", "t_emma") if k in choices}, indent=1, default=str))


def release_specs(state: dict, choices: dict, budgets: tuple[int, ...] = (300, 500, 1000),
                  ours_rows: bool = True, policies: tuple[str, ...] | None = None) -> tuple[list, str | None]:
    """The test rows: offline references, our dev-chosen systems (``ours``), each peer policy's dev-chosen
    configuration per budget in ``budgets``; and the reference every row is compared with (LocalAgreement-2 at
    1 s, its dev-chosen configuration), named whether or not this part scores it. ``ours_rows`` False: the peers
    alone (a part of a release scored in parts); ``policies``: only these peer kinds (None: every one). Nothing here
    looks at test."""
    from recognizer.spec import Peer, RecognizerSpec

    specs = _ours_release_specs(state, choices) if ours_rows else []  # peers alone need no trained artifact
    peers = choices.get("peers", {})
    for key, peer in sorted(peers.items(), key=lambda kv: (kv[1]["kind"], kv[1]["chunk_ms"])):
        if peer["chunk_ms"] in budgets and (policies is None or peer["kind"] in policies):
            specs.append(RecognizerSpec(peer["name"], peer["kind"], peer["chunk_ms"], peer=Peer(peer["vac"])))
    reference = peers.get("whisperlivekit-la@1000", {}).get("name")
    return specs, reference


def _ours_release_specs(state: dict, choices: dict) -> list:
    """The offline references and our dev-chosen systems, from the trained artifacts of ``state``."""
    from benchmarks import selection as sel
    from recognizer.spec import Decoding, from_dict

    art = state["artifacts"]
    seeds = _seeds(art)
    first = art["adapters"][f"300ms-seed{seeds[0]}"]["adapter_dir"]
    rcs = art["adapters"].get("rcs", {}).get("adapter_dir")
    champ = choices.get("champion", {})
    if choices.get("adapter"):  # the dev-chosen seed's adapter is the one every row of ours uses
        first = choices["adapter"]["adapter_dir"]
    ours = [sel.causal("causal tuned 300 ms", 300, first)]
    if "beam_4_vs_greedy" in choices.get("decoding", {}):
        ours.append(sel.causal("causal tuned 300 ms beam 4", 300, first, decoding=Decoding(4)))
    if rcs:
        ours.append(sel.causal("causal random-chunk adapter 1000 ms beam 4", 1000, rcs, decoding=Decoding(4)))
    if art.get("emma") and choices.get("t_emma"):  # (t_emma is only chosen when dev scored the thresholds)
        e, t = art["emma"], choices["t_emma"]["t_emma"]
        ours.append(sel.causal(f"causal tuned + EMMA 300 ms (t_emma {t})", 300, e["adapter_dir"],
                               decoding=Decoding(1, e["policy_dir"], t)))
    if "two_pass_vs_causal_alone" in choices.get("decoding", {}):  # only what dev measured reaches test
        ours.append(sel.two_pass_spec(art, seeds, "two-pass 300 ms", adapter=first))
    if champ.get("name"):  # chosen on dev under any spec schema this code reads
        spec = from_dict(champ["spec"]).with_(name=f"champion (dev): {champ['name']}")
        ours = [s for s in ours if s.with_(name=spec.name) != spec] + [spec]
    specs = list(sel.OFFLINE)
    return specs + ours


def stage_release(args, out: Path, state: dict) -> None:
    """Scores one part of the release on test (``--budgets`` picks the peer rows, ``--peers-only`` leaves out the
    offline references and ours) and merges it into ``benchmarks/results/evaluation.json``
    (``evaluation.merge``): a release that does not fit in one sitting is finished part by part."""
    from evaluation.merge import budget_coverage

    choices = json.loads((SELECTION / "choices.json").read_text())
    budgets = _budgets(args)
    policies = tuple(f"whisperlivekit-{p.strip()}" for p in args.policies.split(",")) if args.policies else None
    specs, reference = release_specs(state, choices, budgets, ours_rows=not args.peers_only, policies=policies)
    if not specs:
        raise SystemExit("release: nothing to score (--peers-only with no --budgets)")
    tag = ("peers" if args.peers_only else "ours") + ("-" + "_".join(map(str, budgets)) if budgets else "")
    result = _release_part(args, out, state, specs, reference, tag)
    result["selection"] = {"choices": "benchmarks/results/selection/choices.json", "champion": choices.get("champion"),
                           "peers_by_budget": {k: {"name": v["name"], "vac": v["vac"], "dev_wer": v["dev_wer"]}
                                               for k, v in choices.get("peers", {}).items()},
                           "t_emma": choices.get("t_emma", {}).get("t_emma")}
    result["peers_on_test"] = budget_coverage(result["systems"], choices.get("peers", {}))
    champ = next((r for r in result["systems"] if r["name"].startswith("champion (dev)")), None)
    result["best_streaming"] = None if champ is None else {
        k: champ.get(k) for k in ("name", "chunk_ms", "wer", "word_latency_ms_median", "word_latency_ms_p90", "rtf",
                                  "ci95", "vs_reference")} | {"selected_on": "dev"}
    result["training"] = {"datasets": _train_sets(state), "splits": ["train"],
                          "artifacts": state.get("artifacts", {})}
    _write_release(result)


def _release_part(args, out: Path, state: dict, specs, reference: str | None, tag: str) -> dict:
    """``specs`` scored on the real test split (one line in the ledger) and merged into the report so far."""
    from benchmarks.evidence import dataset_counts
    from data.kokoro_files import DEV_VOICES
    from evaluation.ledger import scored_per_system
    from evaluation.merge import merge_release
    from evaluation.sets import describe, load_split

    real = state["datasets"]["real"]
    part = _evaluate(specs, [real], _train_sets(state), "test", out / f"release-{tag}", args,
                     reference=reference if reference in {s.name for s in specs} else None,
                     ledger_path=str(LEDGER), purpose="release")
    path = RESULTS / "evaluation.json"
    previous = json.loads(path.read_text()) if path.exists() else None
    result = merge_release(previous, part, reference=reference,
                           scored_per_system=scored_per_system(LEDGER, part["test_set"]["audio_sha256"]))
    dev = load_split([real], ["dev"])
    syn_dir = state["datasets"]["kokoro_dev"]
    syn = load_split([syn_dir], ["dev"])
    result["dev_set"] = describe([real], ["dev"], dev)
    result["synthetic_dev_set"] = {**describe([syn_dir], ["dev"], syn), "voices": list(DEV_VOICES),
                                   "engine": "Kokoro-82M (data.tts_kokoro), voices no training utterance uses"}
    result["datasets"] = {k: dataset_counts(v) for k, v in state["datasets"].items()}
    return result


def _unscored(specs, path: Path, audio_sha256: str) -> list:
    """The specs the report does not hold yet on the test split whose audio hashes to ``audio_sha256`` (a report of
    another split holds none of them). A row already scored with the same system under another name is renamed in
    the report instead of scored again (a label corrected, not a new look at test)."""
    from recognizer.spec import SchemaError, from_dict

    if not path.exists():
        return list(specs)
    report = json.loads(path.read_text())
    if report.get("test_set", {}).get("audio_sha256") != audio_sha256:
        return list(specs)

    def system(values: dict) -> str | None:
        """The system a row scored, under whichever spec schema it was scored (None: one this code cannot build)."""
        try:
            return json.dumps({**from_dict(values).as_dict(), "name": ""}, sort_keys=True)
        except SchemaError:
            return None

    by_system = {system(r["spec"]): r for r in report["systems"] if r.get("spec")}
    todo, renamed = [], False
    for spec in specs:
        row = by_system.get(system(spec.as_dict()))
        if row is None:
            todo.append(spec)
        elif row["name"] != spec.name and spec.name not in {r["name"] for r in report["systems"]}:
            row["name"], row["spec"]["name"], renamed = spec.name, spec.name, True
    if renamed:
        path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return todo


def _write_release(result: dict) -> None:
    """The report, with the partials' headline keys recomputed from its rows (every part keeps them current)."""
    from evaluation.headline import OFFLINE, partials_headline
    from evaluation.report import write_report

    if any(r["name"] == OFFLINE for r in result["systems"]):
        result.update(partials_headline(result["systems"]))
    result.setdefault("commands", []).append(" ".join(["python", *sys.argv]))
    for p in write_report(result, RESULTS, "evaluation"):
        print(p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("data", "train", "select", "choose", "release"))
    parser.add_argument("--out", default="outputs/bench-evaluation")
    parser.add_argument("--shared-data", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--n-synth", type=int, default=240)
    parser.add_argument("--datasets", default="", help="data: only these (e.g. real,longform; default: every one)")
    parser.add_argument("--steps", type=int, default=160)
    parser.add_argument("--seed", type=int, action="append", help="training seeds of the 300 ms recipe (repeat)")
    parser.add_argument("--no-rcs", action="store_true")
    parser.add_argument("--no-hush", action="store_true")
    parser.add_argument("--no-emma", action="store_true")
    parser.add_argument("--hush-epochs", type=int, default=30)
    parser.add_argument("--emma-steps", type=int, default=80)
    parser.add_argument("--sets", default="peers,real,synthetic",
                        help="select: peers (the PyPI peers on real dev), real (ours on real dev), synthetic")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--short-list", action="store_true",
                        help="select: ours = the offline references and every seed, greedy (no beam, cache, EMMA, "
                             "two-pass candidates)")
    parser.add_argument("--budgets", default="300,500,1000", help="select / release: the latency budgets whose "
                        "peer configurations are scored ('' for none)")
    parser.add_argument("--policies", default="", help="release: only these peer policies ('la', 'simul'; "
                        "default: both)")
    parser.add_argument("--peers-only", action="store_true",
                        help="release: score only the peer rows of --budgets (a release scored in parts)")
    parser.add_argument("--peer-stride", type=int, default=2,
                        help="select: the peers' 12 configurations stream every k-th dev utterance (their CPU cost: "
                             "LocalAgreement-2 at 300 ms runs at 1.7× real time on 2 cores)")
    args = parser.parse_args()
    args.seed = args.seed or [3407, 1, 2]
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(out / ".prefect"))
    args.tracking = f"sqlite:///{out / 'mlflow.db'}"
    state = _state(out)
    from tasks.runtime import prefect_api

    with prefect_api():
        if args.stage == "choose":
            seeds = _seeds(state.get("artifacts", {}))
            _choose(state, {}, seeds, args)
        else:
            {"data": stage_data, "train": stage_train, "select": stage_select, "release": stage_release}[args.stage](
                args, out, state)
    if args.stage in ("data", "train"):  # the other stages only read the state (they may run beside these)
        _save(out, state)


if __name__ == "__main__":
    main()
