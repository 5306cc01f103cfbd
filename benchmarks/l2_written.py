"""Experiment (issue 66): train on speechocean762's prompts as Whisper writes text, not in capitals.

    python -m benchmarks.l2_written --state outputs/bench-evaluation/state.json --out-state STATE

speechocean762's references are its prompt texts in capitals without punctuation ("WE CALL IT BEAR"). The
training targets are their tokens, so 90 % of a real + synthetic mix teaches the decoder capital-letter tokens
(" WE CALL IT BEAR"), a style Whisper's decoder rarely writes. Scoring normalises case, so this can only show as
a worse decoder: the real-speech recipes were separably worse on read English dev at seed 1
(``docs/decisions/real-speech-recipe.md``, ``real-speech-mix.md``). The arm trains on the same audio and words in
written form: sentence case, "I" capitalised, a full stop (``written``).

This script builds that training version: a corpus folder beside the outputs (``opus/`` and ``speakers.tsv``
linked to ``../shared``, read in place; ``transcripts.tsv`` rewritten), built with the real training speech's own
settings (same speakers in each split, checked), added to a copy of the state as ``l2_written``. The dev and test
sets keep the corpus as it is. The decision: ``docs/decisions/pending/real-speech-written.yaml``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.evaluation import L2_CORPUS, dataset_counts

REPO = Path(__file__).resolve().parent.parent


def written(text: str) -> str:
    """A prompt in capitals as written English: "WE CALL IT BEAR" → "We call it bear.", "I'M" → "I'm"."""
    words = [w.lower() for w in text.split()]
    words = ["I" + w[1:] if w == "i" or w.startswith("i'") else w for w in words]
    if not words:
        raise ValueError("an empty prompt")
    sentence = " ".join(words)
    return sentence[0].upper() + sentence[1:] + ("" if sentence[-1] in ".?!" else ".")


def write_folder(source: Path, folder: Path) -> Path:
    """``folder/speechocean762``: links to ``source``'s audio and speakers, transcripts in written form."""
    corpus = folder / source.name
    corpus.mkdir(parents=True, exist_ok=True)
    for name in ("opus", "speakers.tsv"):
        link = corpus / name
        if not link.exists():
            link.symlink_to(source / name, target_is_directory=name == "opus")
    lines = []
    for line in (source / "transcripts.tsv").read_text(encoding="utf-8").splitlines():
        utt, _, text = line.partition("\t")
        lines.append(f"{utt}\t{written(text)}")
    (corpus / "transcripts.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corpus


def main() -> None:
    from configs.pipeline import load_pipeline_config
    from flows.build_dataset import run_build

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--out-state", required=True)
    parser.add_argument("--shared-data", default=str(REPO.parent / "shared" / "data"))
    args = parser.parse_args()
    state = json.loads(Path(args.state).read_text())
    out = Path(args.state).resolve().parent
    corpus = write_folder((Path(args.shared_data) / L2_CORPUS).resolve(), out / "corpora" / "l2-written")
    config = load_pipeline_config(str(REPO / "configs" / "smoke.yaml")).real_train_dataset("speechocean762")
    summary = run_build(str(corpus), str(out / "datasets" / "l2-written"), config, 2)
    new, old = dataset_counts(summary["version_dir"]), state["dataset_counts"]["l2"]
    for key in ("per_split", "speakers_per_split"):
        if new[key] != old[key]:
            raise SystemExit(f"l2_written's {key} {new[key]} differs from l2's {old[key]}")
    state["datasets"]["l2_written"] = summary["version_dir"]
    state["dataset_counts"]["l2_written"] = new
    Path(args.out_state).write_text(json.dumps(state, indent=1) + "\n")
    print(json.dumps(new))


if __name__ == "__main__":
    main()
