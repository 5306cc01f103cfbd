"""Hush word vs 30 s padding vs naive paddings on real speech the hush word never saw.
Writes benchmarks/results/hush_word.json + .md.

Training data: the espeak-ng corpus (train split; its dev split validates) + the first ``--real-train`` LJSpeech
utterances. Evaluation: the remaining real utterances (LJSpeech after those + all CMU ARCTIC), greedy, no
timestamps; WER (EnglishTextNormalizer + jiwer), analytic encoder MACs, wall time, hallucinated words.

Run: ``python benchmarks/hush_word.py [--epochs 10] [--hush-word DIR]`` (``--hush-word``: evaluate a trained one).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from benchmarks.common import markdown_table, realspeech_path, write_results  # noqa: E402


def _real_subset(realspeech: Path, out: Path, n: int) -> Path:
    """The first n LJSpeech utterances as their own corpus folder (under outputs/, git-ignored)."""
    import shutil

    dst = out / "corpora" / f"realspeech-lj{n}" / "ljspeech"
    lines = (realspeech / "ljspeech" / "transcripts.tsv").read_text().splitlines()[:n]
    (dst / "wav").mkdir(parents=True, exist_ok=True)
    (dst / "transcripts.tsv").write_text("\n".join(lines) + "\n")
    for line in lines:
        utt = line.split("\t")[0]
        shutil.copy(realspeech / "ljspeech" / "wav" / f"{utt}.wav", dst / "wav" / f"{utt}.wav")
    return dst.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--bound", type=float, default=0.1)
    parser.add_argument("--real-train", type=int, default=20)
    parser.add_argument("--eot-weight", type=float, default=5.0)
    parser.add_argument("--crop-prob", type=float, default=0.0)
    parser.add_argument("--n-synth", type=int, default=240)
    parser.add_argument("--hush-word", default=None, help="evaluate this trained hush word instead of training")
    parser.add_argument("--out", default="outputs")
    parser.add_argument("--realspeech", default=None)
    parser.add_argument("--tracking-uri", default=None, help="MLflow (default: sqlite <out>/mlflow-hushword.db)")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    real = realspeech_path(args.realspeech)

    import torch

    from configs.dataset import load_dataset_config
    from configs.hush_word import HushWordConfig
    from data.synth import write_synthetic_corpus
    from flows.build_dataset import run_build
    from tasks.runtime import prefect_api
    from training.hush_word.evaluate import evaluate_conditions
    from training.hush_word.frontend import load_hush_word
    from training.hush_word.run import train_hush_word
    from evaluation.sets import load_realspeech
    from training.weights import load_model

    training = None
    if args.hush_word is None:
        cfg_ds = load_dataset_config(str(Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml"))
        with prefect_api():
            corpus = write_synthetic_corpus(out / "corpora" / f"synth-{args.n_synth}", args.n_synth, seed=0)
            synth = run_build(str(corpus), str(out / "datasets"), cfg_ds.model_copy(update={"name": f"synth{args.n_synth}"}), 2)
            real_train = run_build(str(_real_subset(real, out, args.real_train)), str(out / "datasets"),
                                   cfg_ds.model_copy(update={"name": f"realspeech-lj{args.real_train}",
                                                             "splits": {"train": 1.0}}), 2)
        cfg = HushWordConfig(datasets=(synth["version_dir"], real_train["version_dir"]), splits=("train",),
                             validation_datasets=(synth["version_dir"],), validation_splits=("dev",),
                             epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, amplitude_bound=args.bound,
                             eot_weight=args.eot_weight, crop_prob=args.crop_prob,
                             storage_path=str(out / "ray"), output_dir=str(out / "hush_words"),
                             tracking_uri=args.tracking_uri or f"sqlite:///{out / 'mlflow-hushword.db'}",
                             experiment="bench-hushword")
        training = train_hush_word(cfg)
        hush_dir = training["hush_word_dir"]
    else:
        hush_dir = args.hush_word

    torch.set_num_threads(2)
    utterances = load_realspeech(real)
    held_out = [u for u in utterances if not (u.utt_id.startswith("LJ") and utterances.index(u) < args.real_train)]
    hush = load_hush_word(hush_dir)
    scores = evaluate_conditions(load_model("tiny.en").eval(), held_out, hush)
    pad30, hushed = scores["pad30"], scores["hush"]
    naive = {c: s for c, s in scores.items() if c.startswith(("zeros", "noise"))}
    payload = {
        "model": "tiny.en",
        "eval_set": f"{len(held_out)} real utterances not used in training",
        "hush_word_dir": hush_dir,
        "training": training and {k: training[k] for k in ("run_id", "train_wall_s", "metrics", "registered_version")},
        "mac_reduction_vs_pad30": round(pad30["encoder_gmacs_mean"] / hushed["encoder_gmacs_mean"], 3),
        "wer_pad30": pad30["wer"], "wer_hush": hushed["wer"], "wer_nopad": scores["nopad"]["wer"],
        "naive": {c: {"wer": s["wer"], "encoder_gmacs_mean": s["encoder_gmacs_mean"]} for c, s in naive.items()},
        "conditions": {c: {k: v for k, v in s.items() if k != "hypotheses"} for c, s in scores.items()},
        "hypotheses": {c: s["hypotheses"] for c, s in scores.items()},
        "references": [u.reference for u in held_out],
    }
    payload["goal"] = {
        "mac_reduction_ge_3": payload["mac_reduction_vs_pad30"] >= 3,
        "wer_within_1pt_of_pad30": hushed["wer"] <= pad30["wer"] + 0.01,
        "beats_nopad": hushed["wer"] < scores["nopad"]["wer"],
        "beats_every_naive_at_equal_or_lower_cost": all(
            hushed["wer"] < s["wer"] for s in naive.values() if s["encoder_gmacs_mean"] >= hushed["encoder_gmacs_mean"]),
    }
    rows = [[c, f"{100 * s['wer']:.2f}", s["encoder_gmacs_mean"], s["encoder_frames_mean"], s["wall_ms_median"],
             s["hallucinated_words"], s["runaways"]] for c, s in scores.items()]
    table = (f"Hush word vs paddings, tiny.en, {payload['eval_set']}; MAC reduction vs 30 s padding "
             f"{payload['mac_reduction_vs_pad30']}×\n\n"
             + markdown_table(["condition", "WER %", "encoder GMACs / utt", "encoder frames", "wall ms median",
                               "hallucinated words", "runaways"], rows))
    write_results("hush_word", payload, table)


if __name__ == "__main__":
    main()
