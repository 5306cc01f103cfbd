"""Evaluation sets: the utterances every system is scored on, with their aligned reference words.

Two sources: the shipped real speech read in place (``load_realspeech``: transcripts + the pocketsphinx
alignment that ships with it), and a split of dataset versions (``load_split``: the `test` split is what headline
numbers are measured on; `dev` is what selection uses). ``describe`` gives what a report states about a set.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import soundfile as sf

from data.corpus import domain_of
from data.manifest import read_manifest
from data.synth import read_word_alignments


@dataclass(frozen=True)
class Utterance:
    utt_id: str
    audio: np.ndarray  # float32, 16 kHz
    reference: str
    words: tuple[tuple[str, int, int], ...]  # aligned reference words (word, start_ms, end_ms)
    # the recording it was cut from (a long-form segment: intervals resample whole recordings); None: its own
    recording: str | None = None
    domain: str | None = None  # evaluation.domains: what a report's per-domain rows group it under


def eval_utterance(u) -> Utterance:
    """A dataset version's utterance (``data.utterances.TrainUtterance``) as the evaluation scores it."""
    return Utterance(u.key, u.audio, u.transcript, u.words)


def load_realspeech(root, corpora: Sequence[str] = ("ljspeech", "cmu_arctic"), limit: dict[str, int] | None = None
                    ) -> list[Utterance]:
    """The real speech with its transcripts and the shipped pocketsphinx word alignment (read in place)."""
    out = []
    for corpus in corpora:
        folder = Path(root) / corpus
        words = read_word_alignments(folder / "word_alignments_pocketsphinx.tsv")
        lines = folder.joinpath("transcripts.tsv").read_text(encoding="utf-8").splitlines()
        for line in lines[: (limit or {}).get(corpus)]:
            utt, text = line.split("\t", 1)
            audio, rate = sf.read(folder / "wav" / f"{utt}.wav", dtype="float32")
            if rate != 16_000:
                raise ValueError(f"{utt}: expected 16 kHz audio, got {rate}")
            out.append(Utterance(utt, audio, text, tuple(words[utt])))
    return out


def load_split(version_dirs: Sequence[str | Path], splits: Sequence[str], limit: int | None = None
               ) -> list[Utterance]:
    """The utterances of ``splits`` in dataset versions (shards read in secure mode), words from the manifest, each
    with the manifest's ``recording_id`` (the segments of one long-form recording share it)."""
    from data.utterances import read_all  # lazy: the shard reader pulls torch (webdataset); scoring needs none

    recording: dict[str, str] = {}
    domain: dict[str, str] = {}
    for d in version_dirs:
        table = read_manifest(d)
        keys = table["key"].to_pylist()
        if "recording_id" in table.column_names:  # versions built before long-form input have no such column
            recording.update(zip(keys, table["recording_id"].to_pylist(), strict=True))
        domain.update((k, domain_of(c, k)) for k, c in zip(keys, table["corpus"].to_pylist(), strict=True))
    return [replace(eval_utterance(u), recording=recording.get(u.key), domain=domain.get(u.key))
            for u in read_all([str(d) for d in version_dirs], splits, limit)]


def describe(version_dirs: Sequence[str | Path], splits: Sequence[str], utterances: Sequence[Utterance]) -> dict:
    """n, seconds, speakers and corpora of a split, and a content hash of its audio (what a report names)."""
    keys = {u.utt_id for u in utterances}
    rows = [r for d in version_dirs for r in read_manifest(d).to_pylist() if r["split"] in splits and r["key"] in keys]
    return {"n_utterances": len(utterances), "seconds": round(sum(len(u.audio) for u in utterances) / 16_000, 1),
            "speakers": len({(r["corpus"], r["speaker"]) for r in rows}),
            "n_words": sum(len(r["words"]) for r in rows),  # aligned transcript words (dataset.json counts these)
            "corpora": sorted({r["corpus"] for r in rows}), "splits": list(splits), "audio_sha256": _digest(rows)}


def split_sha256(version_dirs: Sequence[str | Path], splits: Sequence[str]) -> str:
    """``describe``'s audio hash of whole splits (every utterance ``load_split`` reads), from the manifests alone:
    which test set a report holds, without reading its audio."""
    return _digest([r for d in version_dirs for r in read_manifest(d).to_pylist() if r["split"] in splits])


def _digest(rows: Sequence[dict]) -> str:
    return hashlib.sha256("".join(sorted(r["audio_sha256"] for r in rows)).encode()).hexdigest()
