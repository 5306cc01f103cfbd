"""Long-form evaluation streams: continuous audio of minutes, streamed whole, with no per-utterance end of stream.

Two sources, both from dataset versions (word times from the project's aligner):
- ``whole_recordings``: the segments of a long recording (the build cuts a recording mid-pause into segments that
  tile it: ``<id>-s000``, ``-s001``, … sharing ``recording_id``) joined back into the recording.
- ``speaker_streams``: one speaker's utterances joined in order with the pauses their clips carry (what
  ``../shared/data/longform/README.md`` suggests for streams of 10 minutes and more), each stream cut at
  ``max_s``. Reports name which source every stream came from.

A stream is an ``Utterance`` like any other (its ``recording`` is itself): the evaluate stage's harness, intervals
(resampled over streams) and live feeding apply unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

import numpy as np

from data.manifest import read_manifest
from evaluation.sets import Utterance

SAMPLE_RATE = 16_000


def join(utterances: Sequence[Utterance], stream_id: str) -> Utterance:
    """``utterances`` played one after the other: audio concatenated, word times shifted by the audio before them,
    references joined."""
    if not utterances:
        raise ValueError(f"{stream_id}: no utterances to join")
    words: list[tuple[str, int, int]] = []
    offset_ms = 0
    for u in utterances:
        words += [(w, start + offset_ms, end + offset_ms) for w, start, end in u.words]
        offset_ms += round(len(u.audio) * 1000 / SAMPLE_RATE)
    audio = np.concatenate([np.asarray(u.audio, dtype=np.float32) for u in utterances])
    return Utterance(stream_id, audio, " ".join(u.reference for u in utterances), tuple(words), recording=stream_id)


def whole_recordings(utterances: Sequence[Utterance]) -> list[Utterance]:
    """Each long recording's segments (same ``recording``, in key order) joined back into the recording; an
    utterance that is no segment of a longer recording (a recording of one piece) is left out."""
    by_recording = sorted((u for u in utterances if u.recording), key=lambda u: (u.recording, u.utt_id))
    groups = [(rec, list(group)) for rec, group in groupby(by_recording, key=lambda u: u.recording)]
    return [join(parts, rec) for rec, parts in groups if len(parts) >= 2]


def speaker_streams(utterances: Sequence[Utterance], speaker_of: dict[str, str], *, max_s: float = 600.0,
                    min_s: float = 60.0) -> list[Utterance]:
    """Per speaker, their utterances in key order joined into streams of at most ``max_s`` (a stream shorter than
    ``min_s`` is dropped: it would be no long-form test). ``speaker_of``: utterance id → speaker id."""
    streams = []
    by_speaker = sorted((u for u in utterances if u.utt_id in speaker_of), key=lambda u: (speaker_of[u.utt_id],
                                                                                           u.utt_id))
    for speaker, group in groupby(by_speaker, key=lambda u: speaker_of[u.utt_id]):
        current: list[Utterance] = []
        seconds = 0.0
        for u in group:
            length = len(u.audio) / SAMPLE_RATE
            if current and seconds + length > max_s:
                streams.append(current)
                current, seconds = [], 0.0
            current.append(u)
            seconds += length
        if current:
            streams.append(current)
    out = []
    for parts in streams:
        if sum(len(u.audio) for u in parts) / SAMPLE_RATE >= min_s:
            out.append(join(parts, f"{parts[0].utt_id}+{len(parts) - 1}"))
    return out


def speakers(version_dirs: Sequence[str], split: str) -> dict[str, str]:
    """utterance key → ``corpus/speaker`` of a split, from the manifests."""
    out = {}
    for d in version_dirs:
        for row in read_manifest(d).to_pylist():
            if row["split"] == split:
                out[row["key"]] = f"{row['corpus']}/{row['speaker']}"
    return out
