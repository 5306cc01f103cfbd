"""Corpus recipes: turn a corpus description into `CorpusItem`s (lhotse-style: functions, not classes).

Accepted descriptions (``read_corpus`` picks by what the path is):
- a folder with ``transcripts.tsv`` (``utt_id<TAB>text``) and audio in ``wav/`` or beside it,
  optionally ``speakers.tsv`` (``utt_id<TAB>speaker``); a folder of such folders reads them all;
- a ``.jsonl`` or ``.csv`` manifest with columns id/utt_id, audio/audio_path/path, text/transcript,
  optional speaker, start_s, duration_s (relative paths are relative to the manifest);
- ``lhotse:<recordings.jsonl[.gz]>,<supervisions.jsonl[.gz]>`` for LibriSpeech / Common Voice
  prepared with lhotse (one item per supervision segment).

Problems found while reading (a transcript line without audio, audio without a transcript,
a malformed line, a duplicate id) become `ScanReject`s: nothing is dropped silently.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3")
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class CorpusItem:
    utt_id: str
    audio_path: str  # absolute
    transcript: str
    speaker: str
    corpus: str
    start_s: float = 0.0  # segment offset inside the recording (lhotse supervisions)
    duration_s: float | None = None  # None: the whole file


@dataclass(frozen=True, slots=True)
class ScanReject:
    utt_id: str
    source_path: str
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Scan:
    items: tuple[CorpusItem, ...]
    rejects: tuple[ScanReject, ...]

    @property
    def n_inputs(self) -> int:
        return len(self.items) + len(self.rejects)


def sample_key(utt_id: str) -> str:
    """WebDataset key: no dots (the reader splits name and extension at the first dot)."""
    return _KEY_UNSAFE.sub("_", utt_id)


def read_corpus(spec: str | Path) -> Scan:
    text = str(spec)
    if text.startswith("lhotse:"):
        recordings, _, supervisions = text[len("lhotse:") :].partition(",")
        if not supervisions:
            raise ValueError("lhotse corpus spec is 'lhotse:<recordings>,<supervisions>'")
        items, rejects = read_lhotse(Path(recordings), Path(supervisions))
    else:
        path = Path(spec).expanduser().resolve()
        if not path.exists():
            raise FileNotFoundError(f"corpus not found: {path}")
        if path.is_dir():
            items, rejects = _read_folders(path)
        elif path.suffix == ".jsonl":
            items, rejects = read_table(path, _jsonl_rows(path))
        elif path.suffix == ".csv":
            with path.open(newline="", encoding="utf-8") as fh:
                items, rejects = read_table(path, list(csv.DictReader(fh)))
        else:
            raise ValueError(f"unknown corpus description {path}: expected a folder, .jsonl, .csv or lhotse:…")
    return _dedupe(items, rejects)


def _read_folders(root: Path) -> tuple[list[CorpusItem], list[ScanReject]]:
    if (root / "transcripts.tsv").exists():
        return read_folder(root)
    subdirs = sorted(p for p in root.iterdir() if (p / "transcripts.tsv").exists())
    if not subdirs:
        raise ValueError(f"{root}: no transcripts.tsv here or in any sub-folder")
    items: list[CorpusItem] = []
    rejects: list[ScanReject] = []
    for sub in subdirs:
        sub_items, sub_rejects = read_folder(sub)
        items += sub_items
        rejects += sub_rejects
    return items, rejects


# Speaker ids that public corpora put in their utterance ids, for folders without a speakers.tsv (so that a split
# by speaker holds speakers out). Anything else: the folder name, i.e. one speaker per folder.
_SPEAKER_IN_ID = (
    re.compile(r"^cmu_us_(?P<speaker>[a-z]+)_[ab]\d{4}$"),  # CMU ARCTIC: cmu_us_aew_a0002
    re.compile(r"^(?:ls-)?(?P<speaker>\d+)-\d+-\d+$"),  # LibriSpeech: 1272-128104-0000
    re.compile(r"^(?:vctk-)?(?P<speaker>p\d{3})_\d{3}"),  # VCTK: p225_001
)


def speaker_from_id(utt_id: str) -> str | None:
    for pattern in _SPEAKER_IN_ID:
        if m := pattern.match(utt_id):
            return m.group("speaker")
    return None


def read_folder(folder: Path) -> tuple[list[CorpusItem], list[ScanReject]]:
    """One corpus folder: transcripts.tsv + audio files (in wav/ or beside the tsv)."""
    audio_dir = folder / "wav" if (folder / "wav").is_dir() else folder
    audio = {p.stem: p for p in sorted(audio_dir.iterdir()) if p.suffix.lower() in AUDIO_SUFFIXES}
    speakers = dict(_tsv_pairs(folder / "speakers.tsv")[0]) if (folder / "speakers.tsv").exists() else {}
    pairs, bad_lines = _tsv_pairs(folder / "transcripts.tsv")
    items: list[CorpusItem] = []
    rejects = [ScanReject(f"{folder.name}:line{n}", str(folder / "transcripts.tsv"), "bad_manifest_line", line)
               for n, line in bad_lines]
    seen: set[str] = set()
    for utt_id, text in pairs:
        seen.add(utt_id)
        path = audio.get(utt_id)
        if path is None:
            rejects.append(ScanReject(utt_id, str(audio_dir / f"{utt_id}.wav"), "missing_audio", "no audio file for this transcript line"))
            continue
        speaker = speakers.get(utt_id) or speaker_from_id(utt_id) or folder.name
        items.append(CorpusItem(utt_id, str(path), text, speaker, folder.name))
    for stem, path in audio.items():
        if stem not in seen:
            rejects.append(ScanReject(stem, str(path), "missing_transcript", "audio file has no line in transcripts.tsv"))
    return items, rejects


def _tsv_pairs(path: Path) -> tuple[list[tuple[str, str]], list[tuple[int, str]]]:
    pairs: list[tuple[str, str]] = []
    bad: list[tuple[int, str]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        utt_id, tab, text = line.partition("\t")
        if not tab or not utt_id.strip():
            bad.append((n, line[:200]))
            continue
        pairs.append((utt_id.strip(), text.strip()))
    return pairs, bad


def _jsonl_rows(path: Path) -> list[dict]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            rows.append(row if isinstance(row, dict) else {"_bad": line, "_line": n})
        except json.JSONDecodeError:
            rows.append({"_bad": line, "_line": n})
    return rows


def _first(row: dict, *names: str) -> str | None:
    for name in names:
        if row.get(name) not in (None, ""):
            return str(row[name])
    return None


def read_table(manifest: Path, rows: Iterable[dict]) -> tuple[list[CorpusItem], list[ScanReject]]:
    """JSONL/CSV manifest rows → items; rows missing an id, audio or text become rejects."""
    items: list[CorpusItem] = []
    rejects: list[ScanReject] = []
    for n, row in enumerate(rows, start=1):
        utt_id = _first(row, "id", "utt_id")
        audio = _first(row, "audio_path", "audio", "path")
        text = _first(row, "text", "transcript")
        if "_bad" in row or utt_id is None or audio is None:
            rejects.append(ScanReject(utt_id or f"{manifest.name}:line{row.get('_line', n)}", str(manifest),
                                      "bad_manifest_line", str(row.get("_bad", row))[:200]))
            continue
        audio_path = (manifest.parent / audio).resolve()
        if not audio_path.exists():
            rejects.append(ScanReject(utt_id, str(audio_path), "missing_audio", "audio path does not exist"))
            continue
        duration = _first(row, "duration_s")
        items.append(CorpusItem(utt_id, str(audio_path), text or "", _first(row, "speaker") or manifest.stem,
                                manifest.stem, float(_first(row, "start_s") or 0.0),
                                float(duration) if duration else None))
    return items, rejects


def read_lhotse(recordings: Path, supervisions: Path) -> tuple[list[CorpusItem], list[ScanReject]]:
    """Lhotse RecordingSet + SupervisionSet (e.g. from `lhotse prepare librispeech`)."""
    try:
        from lhotse import load_manifest
    except ImportError as err:  # optional dependency
        raise ImportError("reading lhotse manifests needs `pip install whisperline[lhotse]`") from err
    recs = load_manifest(recordings)
    sups = load_manifest(supervisions)
    items: list[CorpusItem] = []
    rejects: list[ScanReject] = []
    for sup in sups:
        rec = recs[sup.recording_id] if sup.recording_id in recs else None
        if rec is None or len(rec.sources) != 1 or rec.sources[0].type != "file":
            rejects.append(ScanReject(sup.id, str(supervisions), "unsupported_recording",
                                      f"recording {sup.recording_id!r} missing or not a single audio file"))
            continue
        items.append(CorpusItem(sup.id, str(Path(rec.sources[0].source).resolve()), sup.text or "",
                                sup.speaker or rec.id, supervisions.stem.split(".")[0],
                                float(sup.start), float(sup.duration)))
    return items, rejects


def _dedupe(items: list[CorpusItem], rejects: list[ScanReject]) -> Scan:
    """Sort by id (input order must not matter) and reject ids that collide as shard keys."""
    by_key: dict[str, CorpusItem] = {}
    out_rejects = list(rejects)
    for item in sorted(items, key=lambda i: (i.utt_id, i.audio_path)):
        key = sample_key(item.utt_id)
        if key in by_key:
            out_rejects.append(ScanReject(item.utt_id, item.audio_path, "duplicate_id",
                                          f"shard key {key!r} already used by {by_key[key].audio_path}"))
            continue
        by_key[key] = item
    out_rejects.sort(key=lambda r: (r.utt_id, r.reason, r.source_path))
    return Scan(tuple(by_key.values()), tuple(out_rejects))
