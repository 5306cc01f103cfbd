"""Aligner rejects on real-world transcripts (digits, money, dates, acronyms, URLs) and on real speech.

(a) The 50 transcripts of tests/fixtures/real_transcripts.tsv are spoken by Debian's espeak-ng through
    data.synth (espeak reads digits and symbols its own way, e.g. "$1,250" with an "and": the realistic
    mismatch between a written transcript and speech) and force-aligned with the default aligner on
    their verbalized words (data.text / data.verbalize).
    espeak-ng also served as the old pronouncer of digit strings, so (a) flatters the old behaviour:
(b) `HUMAN_READINGS`: some fixture transcripts as people commonly say them ("twelve hundred and fifty
    dollars", "January first, two thousand and one") are spoken by espeak-ng and aligned against
    the *written* fixture transcript: a reading that differs from ours must still align.
(c) Every utterance of the given real-speech roots (folders with transcripts.tsv + wav/) is aligned
    the same way.
Rejects are counted by reason with their ids. `KNOWN_MISMATCHED` lists utterances whose transcript is
not what their audio says (with the evidence): their reject is the right answer, not an aligner fault.

Usage: python -m benchmarks.transcript_rejects [--workdir DIR] [ROOT ...]
(roots default to $WHISPERLINE_REALSPEECH{,_MORE,_EXTRA}, or ../shared/data/realspeech{,-more,-extra})
(d) every real clip of realspeech + realspeech-more (AN4 left out) with the next clip's transcript: wrong pairs
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

FIXTURE = REPO / "tests" / "fixtures" / "real_transcripts.tsv"
KNOWN_MISMATCHED = {
    "ls-1272-128104-0000": (
        "the audio is LibriSpeech 1272-128104-0004, not 0000: Whisper base hears \"Nor is Mr. Quilter's manner "
        "less interesting than his matter.\" and pocketsphinx aligns all 10 words of 0004's transcript "
        "(NOR IS MISTER QUILTER'S MANNER LESS INTERESTING THAN HIS MATTER) over 0.54-4.42 s of the 4.8 s clip, "
        "while no path exists for 0000's 17 words"),
}


# How people commonly read some of the fixture transcripts (another reading than data.verbalize's).
HUMAN_READINGS = {
    "rt-001": "Doctor Smith paid twelve hundred and fifty dollars on March fourth, twenty twenty-one.",
    "rt-004": "Sales rose fifteen percent to three point two billion dollars in twenty nineteen.",
    "rt-009": "The twenty-first century began on January first, two thousand and one.",
    "rt-011": "Call five five five, twelve thirty-four before nine tonight.",
    "rt-016": "Rent went up from nine fifty to eleven hundred dollars per month.",
    "rt-019": "Flight B A two four nine lands at six forty-five p.m., about twenty minutes late.",
    "rt-023": "The U.S. and the U.K. signed the deal on October twelfth.",
    "rt-031": "The company was founded in nineteen hundred and five by Henry Ford's cousin.",
    "rt-040": "The price of gold hit eighteen hundred dollars and fifty cents an ounce on December thirty-first, "
              "twenty twenty.",
    "rt-044": "NATO and the E.U. met in Brussels on June twenty-ninth, twenty twenty-two.",
    "rt-045": "About three and a half million people live in L.A. County.",
    "rt-048": "Naive investors lost two million dollars in the crypto crash of twenty twenty-two.",
}


def read_fixture(path: Path = FIXTURE) -> list[tuple[str, str]]:
    """(id, text) pairs of the fixture file, in order."""
    rows = [line.split("\t", 1) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(utt, text) for utt, text in rows]


def read_folder(folder: Path) -> list[tuple[str, Path, str]]:
    """(utt_id, wav path, transcript) of a corpus folder (transcripts.tsv + wav/<id>.wav), the transcript as a build
    reads it: transcriber annotations (``<cutoff-montreal>``, ``[laughter]``) dropped by data.corpus, and a line that
    is only annotations left out (the build rejects it at scan, ``annotations_only``). Read raw, the markup became
    words no speaker said, and two MFA recordings that a build accepts were counted as aligner failures."""
    from data.corpus import strip_annotations

    out = []
    for line in (folder / "transcripts.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip():
            utt, text = line.split("\t", 1)
            if spoken := strip_annotations(text):
                out.append((utt, folder / "wav" / f"{utt}.wav", spoken))
    return out


def align_all(utterances: list[tuple[str, Path, str]], aligner_name: str = "pocketsphinx",
              truth: dict[str, list[tuple[str, int, int]]] | None = None) -> dict:
    """Align every (id, wav, text); counts of rejects by reason, their ids and details, seconds taken.

    With ``truth`` (id → the synthesizer's own (word, start_ms, end_ms) per display word), also the
    |difference| of every aligned word start and end from it.
    """
    import numpy as np

    import soundfile as sf
    import soxr

    from data.aligners import AlignItem, get_aligner
    from data.text import transcript_words
    from data.types import AlignmentError

    aligner = get_aligner(aligner_name)
    rejects: dict[str, list[str]] = {}
    said_otherwise: list[str] = []
    errors: list[tuple[int, int]] = []
    n_words = n_spoken = 0
    started = time.perf_counter()
    for utt, wav, text in utterances:
        audio, rate = sf.read(wav, dtype="float32", always_2d=True)
        audio = audio.mean(axis=1)
        if rate != 16_000:
            audio = soxr.resample(audio, rate, 16_000).astype("float32")
        words = tuple(w.norm for w in transcript_words(text))
        n_words += len(words)
        n_spoken += sum(len(w.split()) for w in words)
        result = aligner.align_many([AlignItem(utt, audio, words)])[0]
        if isinstance(result, AlignmentError):
            rejects[utt] = [result.reason, result.detail]
        elif truth is not None:
            errors += [(abs(s.start_ms - t[1]), abs(s.end_ms - t[2])) for s, t in zip(result, truth[utt], strict=True)]
        if getattr(aligner, "passes", {}).get("said_otherwise", 0) > len(said_otherwise):
            said_otherwise.append(utt)  # pocketsphinx's flexible grammar replaced an item by a phone loop
    boundary = {}
    if errors:
        err = np.array(errors)
        boundary = {f"{edge}_ms": {"mean": round(float(err[:, c].mean()), 1), "median": float(np.median(err[:, c])),
                                   "p90": round(float(np.percentile(err[:, c], 90)), 1),
                                   "within_50ms": round(float((err[:, c] <= 50).mean()), 3)}
                    for c, edge in enumerate(("start", "end"))}
    return {"aligner": aligner.version, "utterances": len(utterances), "display_words": n_words,
            "spoken_words": n_spoken, "rejects": dict(Counter(r[0] for r in rejects.values())),
            "align_failed": sum(r[0] == "align_failed" for r in rejects.values()),
            "rejected": rejects, "items_said_otherwise": said_otherwise, "seconds": round(time.perf_counter() - started, 2),
            **({"boundary_error_vs_synth": boundary} if boundary else {})}


def measure_fixture(workdir: Path, fixture: Path = FIXTURE, workers: int | None = None) -> dict:
    """Synthesize the fixture transcripts with espeak-ng and align them; rejects keyed by fixture id."""
    from data.synth import ALIGNMENT_FILE, read_word_alignments, write_synthetic_corpus

    rows = read_fixture(fixture)
    started = time.perf_counter()
    corpus = write_synthetic_corpus(workdir / "real_transcripts_espeak", len(rows), texts=[t for _, t in rows],
                                    seed=0, progress=False, workers=workers)
    synth_s = time.perf_counter() - started
    # Utterance i of the corpus speaks text i (data.synth.plan_utterances): name it by its fixture id.
    utts = read_folder(corpus)
    named = [(fid, wav, text) for (fid, _), (_, wav, text) in zip(rows, utts, strict=True)]
    spans = read_word_alignments(corpus / ALIGNMENT_FILE)
    truth = {fid: spans[utt] for (fid, _), (utt, _, _) in zip(rows, utts, strict=True)}
    result = align_all(named, truth=truth)
    result["synth_seconds"] = round(synth_s, 2)
    result["texts"] = {fid: text for fid, text in rows if fid in result["rejected"]}
    return result


def measure_readings(workdir: Path, fixture: Path = FIXTURE, workers: int | None = None) -> dict:
    """HUMAN_READINGS spoken by espeak-ng, aligned against the written fixture transcripts."""
    from data.synth import write_synthetic_corpus

    written = dict(read_fixture(fixture))
    ids = list(HUMAN_READINGS)
    corpus = write_synthetic_corpus(workdir / "human_readings_espeak", len(ids), texts=[HUMAN_READINGS[i] for i in ids],
                                    seed=0, progress=False, workers=workers)
    utts = read_folder(corpus)
    return align_all([(fid, wav, written[fid]) for fid, (_, wav, _) in zip(ids, utts, strict=True)])


def measure_realspeech(roots: list[Path]) -> dict:
    utterances: list[tuple[str, Path, str]] = []
    corpora: dict[str, int] = {}
    for root in roots:
        for tsv in sorted(Path(root).glob("*/transcripts.tsv")):
            folder = read_folder(tsv.parent)
            corpora[f"{Path(root).name}/{tsv.parent.name}"] = len(folder)
            utterances += folder
    result = align_all(utterances)
    result["corpora"] = corpora
    result["known_mismatched"] = {u: why for u, why in KNOWN_MISMATCHED.items() if u in result["rejected"]}
    result["unexpected_rejects"] = sorted(set(result["rejected"]) - set(KNOWN_MISMATCHED))
    return result


def measure_mismatched_pairs(roots: list[Path]) -> dict:
    """Every real clip (AN4's one-word commands left out) paired with the *next* clip's transcript, in folder
    order: a wrong transcript for real speech. Each pair goes through the default aligner as a build would;
    ``mismatched_pairs_accepted`` counts the pairs it would publish as training data."""
    utterances: list[tuple[str, Path, str]] = []
    for root in roots:
        if Path(root).name == "realspeech-extra":
            continue  # the 51 pairs of the issue: realspeech + realspeech-more
        for tsv in sorted(Path(root).glob("*/transcripts.tsv")):
            if tsv.parent.name != "an4":
                utterances += read_folder(tsv.parent)
    pairs = [(f"{utt}<-{nxt}", wav, text) for (utt, wav, _), (nxt, _, text) in zip(utterances, utterances[1:])]
    result = align_all(pairs)
    accepted = sorted(set(p[0] for p in pairs) - set(result["rejected"]))
    return {"pairs": len(pairs), "mismatched_pairs_accepted": len(accepted), "accepted": accepted,
            "rejects": result["rejects"], "seconds": result["seconds"], "aligner": result["aligner"]}


def measure(realspeech_roots: list[Path], workdir: Path, workers: int | None = None) -> dict:
    """(a) the 50 espeak-spoken fixture transcripts, (b) human-style readings of some of them against
    the written transcripts, (c) every utterance of the real-speech roots."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    return {"fixture": measure_fixture(workdir, workers=workers),
            "human_readings": measure_readings(workdir, workers=workers),
            "realspeech": measure_realspeech([Path(r) for r in realspeech_roots]),
            "mismatched_pairs": measure_mismatched_pairs([Path(r) for r in realspeech_roots])}


def default_roots() -> list[Path]:
    roots = []
    for var, default in (("WHISPERLINE_REALSPEECH", "../shared/data/realspeech"),
                         ("WHISPERLINE_REALSPEECH_MORE", "../shared/data/realspeech-more"),
                         ("WHISPERLINE_REALSPEECH_EXTRA", "../shared/data/realspeech-extra")):
        root = Path(os.environ.get(var, default))
        roots.append(root if root.is_absolute() else (REPO / root).resolve())
    return [r for r in roots if r.is_dir()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", type=Path, help="real-speech roots (folders of corpus folders)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the synthetic corpus goes (default: temp)")
    parser.add_argument("--workers", type=int, default=1, help="espeak synthesis processes")
    args = parser.parse_args()
    roots = args.roots or default_roots()
    if args.workdir is not None:
        print(json.dumps(measure(roots, args.workdir, args.workers), indent=2))
        return
    with tempfile.TemporaryDirectory(prefix="wl-transcript-rejects-") as tmp:
        print(json.dumps(measure(roots, Path(tmp), args.workers), indent=2))


if __name__ == "__main__":
    main()
