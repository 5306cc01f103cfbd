"""Lhotse manifests as a corpus (``lhotse:<recordings.jsonl[.gz]>,<supervisions.jsonl[.gz]>``, ``data/recipes.py``):
one item per supervision segment, read as ``data.corpus`` reads every corpus (a generator of items and rejects)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from data import fs
from data.corpus import CorpusItem, Read, ScanReject


def iter_lhotse_spec(recordings: str, supervisions: str) -> Iterator[Read]:
    # manifests in object storage are fetched to temporary files (lhotse reads local paths); the audio they name
    # stays where it is
    with fs.local_copy(recordings) as rec_file, fs.local_copy(supervisions) as sup_file:
        yield from iter_lhotse(Path(rec_file), Path(sup_file), corpus=Path(fs.name(supervisions)).name.split(".")[0])


def iter_lhotse(recordings: Path, supervisions: Path, corpus: str | None = None) -> Iterator[Read]:
    """Lhotse RecordingSet + SupervisionSet (``lhotse prepare librispeech|commonvoice``, data/recipes.py).

    One item per supervision, over ``start``/``duration`` of its recording. The build reads audio files itself
    (libsndfile: wav/flac/ogg, and mp3 with libsndfile >= 1.1), so a recording must be one file, local or an
    ``s3://`` URL (data/fs.py): sources of another type (http url, command, memory), one file per channel,
    transforms other than resampling (the build resamples anyway) and a supervision on some channels of a
    multi-channel file (the build downmixes every channel) become `ScanReject`s saying why. Relative source
    paths are relative to the working directory, as in lhotse.

    The supervisions (one per item) are read lazily from a JSONL manifest; the recordings are looked up by id,
    so they are loaded whole (one per audio file: fewer and smaller).
    """
    try:
        from lhotse import load_manifest, load_manifest_lazy
    except ImportError as err:  # optional dependency
        raise ImportError("reading lhotse manifests needs `pip install whisperline[lhotse]`") from err
    recs = load_manifest(recordings)
    sups = (load_manifest_lazy(supervisions) or []) if ".jsonl" in supervisions.name else load_manifest(supervisions)
    corpus = corpus or supervisions.name.split(".")[0]
    for sup in sups:
        rec = recs[sup.recording_id] if sup.recording_id in recs else None
        problem = None
        if rec is None:
            problem = f"recording {sup.recording_id!r} not in {recordings.name}"
        elif len(rec.sources) != 1:
            problem = f"recording {rec.id!r} has {len(rec.sources)} audio sources (one file per channel?)"
        elif not (rec.sources[0].type == "file" or
                  (rec.sources[0].type == "url" and str(rec.sources[0].source).startswith("s3://"))):
            problem = (f"recording {rec.id!r} source is {rec.sources[0].type!r} "
                       f"({str(rec.sources[0].source)[:80]}), not an audio file or s3:// URL")
        elif extra := [t for t in (rec.transforms or []) if
                       (t.get("name") if isinstance(t, dict) else type(t).__name__) != "Resample"]:
            problem = f"recording {rec.id!r} has transforms the build would not apply: {extra}"
        else:
            channels = sup.channel if isinstance(sup.channel, list) else [sup.channel]
            if len(rec.channel_ids) > 1 and sorted(channels) != sorted(rec.channel_ids):
                problem = (f"supervision on channel(s) {channels} of the {len(rec.channel_ids)}-channel recording "
                           f"{rec.id!r}: the build mixes all channels down")
        if problem:
            source = str(rec.sources[0].source) if rec is not None and rec.sources else str(supervisions)
            yield ScanReject(sup.id, source, "unsupported_recording", problem)
            continue
        source = str(rec.sources[0].source)
        audio_path = source if fs.is_remote(source) else str(Path(source).resolve())
        yield CorpusItem(sup.id, audio_path, sup.text or "", sup.speaker or rec.id, corpus, float(sup.start),
                         float(sup.duration))
