"""Corpus recipes: turn a corpus description into `CorpusItem`s (lhotse-style: functions, not classes).

Accepted descriptions (``read_corpus`` picks by what the path is):
- a folder with ``transcripts.tsv`` (``utt_id<TAB>text``) and audio in ``wav/``, ``opus/`` or beside it,
  optionally ``speakers.tsv`` (``utt_id<TAB>speaker``); a folder of such folders reads them all;
- a ``.jsonl`` or ``.csv`` manifest with columns id/utt_id, audio/audio_path/path, text/transcript,
  optional speaker, start_s, duration_s (relative paths are relative to the manifest);
- ``lhotse:<recordings.jsonl[.gz]>,<supervisions.jsonl[.gz]>`` for LibriSpeech / Common Voice
  prepared with lhotse (one item per supervision segment).

Folders and manifests may be local paths or ``s3://…`` URLs (data/fs.py): audio paths then stay URLs (a relative
path in a manifest is resolved against the manifest's URL; a manifest may also name audio by URL). Local paths are
resolved to absolute paths.

Problems found while reading (a transcript line without audio, audio without a transcript,
a malformed line, a duplicate id) become `ScanReject`s: nothing is dropped silently.

Every reader is a generator (``iter_corpus``: items and rejects as they are read, unsorted, duplicates kept), so a
build of a corpus of any size holds no list of them: ``data.scan.scan`` streams them into a columnar table.
``read_corpus`` (and ``read_folder``, ``read_table``) collect them for callers that want lists.
"""

from __future__ import annotations

import csv
import io
import json
import os
import posixpath
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from data import fs

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".opus", ".mp3")
AUDIO_DIRS = ("wav", "opus")  # where a corpus folder may keep its audio (else beside transcripts.tsv)
# Transcriber annotations that are not words said: [laughter], [noise], <unk>, <cutoff-montreal> (a cut-off
# fragment). They are dropped from the reference: Whisper writes none of them, an aligner cannot pronounce them,
# and a cut-off fragment is not the word it names. An utterance that is only annotations is rejected.
_ANNOTATION = re.compile(r"^(\[[^\]\s]*\]|<[^>\s]*>)$")


# The evaluation domain of each known corpus (evaluation.domains reports per domain; issue 66).
DOMAINS = {"librispeech": "read", "vctk": "read", "cmu_arctic": "read", "ljspeech": "read", "fleurs": "read",
           "longform": "read", "speechocean762": "l2", "mfa": "spontaneous", "an4": "commands", "fsdd": "commands",
           "speech_commands": "commands", "misc": "commands"}
# utterances of a mixed corpus whose domain is not the corpus's: armkit holds 4 LibriSpeech clips and 4 Speech
# Commands clips (../shared/data/realspeech-extra/README.md)
_UTTERANCE_DOMAINS = {"armkit_down": "commands", "armkit_yes": "commands", "armkit_right_left_up": "commands",
                      "armkit_yes_no_go_stop": "commands"}
_CORPUS_DEFAULTS = {"armkit": "read"}


def domain_of(corpus: str, utt_id: str = "") -> str:
    """The domain of one utterance of ``corpus``."""
    return _UTTERANCE_DOMAINS.get(utt_id) or DOMAINS.get(corpus) or _CORPUS_DEFAULTS.get(corpus) or corpus


def strip_annotations(text: str) -> str:
    """``text`` without transcriber annotations (whitespace-separated ``[…]`` / ``<…>`` tokens)."""
    return " ".join(t for t in text.split() if not _ANNOTATION.match(t))
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class CorpusItem:
    utt_id: str
    audio_path: str  # absolute path, or URL (s3://…)
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


# A location: a local folder/file as a Path, or a URL as a str (no trailing '/'). The helpers below take either.
Loc = Path | str


def _loc(path: str | Path) -> Loc:
    text = str(path)
    return text.rstrip("/") if fs.is_remote(text) else Path(path)


def _join(base: Loc, *parts: str) -> Loc:
    return base.joinpath(*parts) if isinstance(base, Path) else fs.join(base, *parts)


def _name(path: Loc) -> str:
    return path.name if isinstance(path, Path) else fs.name(path)


def _stem(path: Loc) -> str:
    return path.stem if isinstance(path, Path) else PurePosixPath(fs.name(path)).stem


def _suffix(path: Loc) -> str:
    return path.suffix if isinstance(path, Path) else PurePosixPath(fs.name(path)).suffix


def _exists(path: Loc) -> bool:
    return path.exists() if isinstance(path, Path) else fs.exists(path)


def _is_dir(path: Loc) -> bool:
    return path.is_dir() if isinstance(path, Path) else fs.isdir(path)


def _entry_names(folder: Loc) -> list[str]:
    """The names in a folder: strings, not a path object per file."""
    if isinstance(folder, Path):
        return sorted(os.listdir(folder))
    return [fs.name(u) for u in fs.listdir(folder)]


def _lines(path: Loc) -> Iterator[str]:
    """A text file's lines, read as they are asked for (a local file is never held whole)."""
    if isinstance(path, Path):
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                yield line.rstrip("\r\n")
    else:
        yield from fs.read_text(path).splitlines()


Read = CorpusItem | ScanReject


def iter_corpus(spec: str | Path) -> Iterator[Read]:
    """The items and rejects of a corpus description as they are read (unsorted; duplicate ids not yet rejected).

    The description is checked before the first item is asked for (a missing corpus raises at once)."""
    text = str(spec)
    if text.startswith("lhotse:"):
        recordings, _, supervisions = text[len("lhotse:") :].partition(",")
        if not supervisions:
            raise ValueError("lhotse corpus spec is 'lhotse:<recordings>,<supervisions>'")
        from data.corpus_lhotse import iter_lhotse_spec  # lazy: data.corpus_lhotse imports this module

        return iter_lhotse_spec(recordings, supervisions)
    if fs.is_remote(text):
        url = _loc(text)
        if not fs.exists(url):
            raise FileNotFoundError(f"corpus not found: {url}")
        if fs.isdir(url):
            return _iter_folders(url)
        if _suffix(url) == ".jsonl":
            return iter_table(url, _jsonl_rows(url))
        if _suffix(url) == ".csv":
            return iter_table(url, csv.DictReader(io.StringIO(fs.read_text(url), newline="")))
        raise ValueError(f"unknown corpus description {url}: expected a folder, .jsonl, .csv or lhotse:…")
    path = Path(spec).expanduser().resolve()
    if not path.exists():
        raise FileNotFoundError(f"corpus not found: {path}")
    if path.is_dir():
        return _iter_folders(path)
    if path.suffix == ".jsonl":
        return iter_table(path, _jsonl_rows(path))
    if path.suffix == ".csv":
        return _iter_csv(path)
    raise ValueError(f"unknown corpus description {path}: expected a folder, .jsonl, .csv or lhotse:…")


def read_corpus(spec: str | Path) -> Scan:
    """The whole corpus, sorted by id, duplicate ids rejected (for callers that want it in memory)."""
    return _dedupe(*collect_reads(iter_corpus(spec)))


def collect_reads(reads: Iterable[Read]) -> tuple[list[CorpusItem], list[ScanReject]]:
    """Reads split into (items, rejects), in reading order."""
    items: list[CorpusItem] = []
    rejects: list[ScanReject] = []
    for r in reads:
        (items if isinstance(r, CorpusItem) else rejects).append(r)
    return items, rejects


def _iter_csv(path: Path) -> Iterator[Read]:
    with path.open(newline="", encoding="utf-8") as fh:
        yield from iter_table(path, csv.DictReader(fh))


def _iter_folders(root: Loc) -> Iterator[Read]:
    if _exists(_join(root, "transcripts.tsv")):
        return iter_folder(root)
    if isinstance(root, Path):
        subdirs = sorted(p for p in root.iterdir() if (p / "transcripts.tsv").exists())
    else:  # one listing instead of a request per entry
        subdirs = sorted(fs.parent(t) for t in fs.glob(fs.join(root, "*", "transcripts.tsv")))
    if not subdirs:
        raise ValueError(f"{root}: no transcripts.tsv here or in any sub-folder")
    return (r for sub in subdirs for r in iter_folder(sub))


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


def read_folder(folder: str | Path) -> tuple[list[CorpusItem], list[ScanReject]]:
    """One corpus folder (a local path or a URL): transcripts.tsv + audio files (in wav/ or beside the tsv)."""
    return collect_reads(iter_folder(folder))


def iter_folder(folder: str | Path) -> Iterator[Read]:
    """:func:`read_folder` as it reads: the transcript lines one by one (the audio folder is listed once: file
    names only)."""
    folder = _loc(folder)
    audio_dir = next((d for d in (_join(folder, name) for name in AUDIO_DIRS) if _is_dir(d)), folder)
    audio = {_stem(name): name for name in _entry_names(audio_dir) if _suffix(name).lower() in AUDIO_SUFFIXES}
    speakers_tsv = _join(folder, "speakers.tsv")
    speakers = dict(p for p in _tsv_pairs(speakers_tsv) if not isinstance(p, BadLine)) if _exists(speakers_tsv) else {}
    transcripts = _join(folder, "transcripts.tsv")
    corpus = _name(folder)
    seen: set[str] = set()
    for line in _tsv_pairs(transcripts):
        if isinstance(line, BadLine):
            yield ScanReject(f"{corpus}:line{line.number}", str(transcripts), "bad_manifest_line", line.text)
            continue
        utt_id, text = line
        seen.add(utt_id)
        name = audio.get(utt_id)
        if name is None:
            yield ScanReject(utt_id, str(_join(audio_dir, f"{utt_id}.wav")), "missing_audio",
                             "no audio file for this transcript line")
            continue
        path = str(_join(audio_dir, name))
        speaker = speakers.get(utt_id) or speaker_from_id(utt_id) or corpus
        spoken = strip_annotations(text)
        if text.strip() and not spoken:  # an empty line is the prepare stage's `empty_transcript`
            yield ScanReject(utt_id, path, "annotations_only", text[:200])
            continue
        yield CorpusItem(utt_id, path, spoken, speaker, corpus)
    for stem, name in audio.items():
        if stem not in seen:
            yield ScanReject(stem, str(_join(audio_dir, name)), "missing_transcript",
                             "audio file has no line in transcripts.tsv")


@dataclass(frozen=True, slots=True)
class BadLine:
    number: int  # 1-based
    text: str  # the line, cut to 200 characters


def _tsv_pairs(path: Loc) -> Iterator[tuple[str, str] | BadLine]:
    """(utt_id, text) per line of a two-column TSV; a line without a tab or an id is a :class:`BadLine`."""
    for n, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        utt_id, tab, text = line.partition("\t")
        if not tab or not utt_id.strip():
            yield BadLine(n, line[:200])
            continue
        yield utt_id.strip(), text.strip()


def _jsonl_rows(path: Loc) -> Iterator[dict]:
    for n, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            yield row if isinstance(row, dict) else {"_bad": line, "_line": n}
        except json.JSONDecodeError:
            yield {"_bad": line, "_line": n}


def _first(row: dict, *names: str) -> str | None:
    for name in names:
        if row.get(name) not in (None, ""):
            return str(row[name])
    return None


class _RemoteListing:
    """Existence of remote audio files, one listing per folder (not one request per file)."""

    def __init__(self) -> None:
        self._folders: dict[str, set[str]] = {}

    def exists(self, url: str) -> bool:
        folder = fs.parent(url)
        if folder not in self._folders:
            self._folders[folder] = set(fs.listdir(folder))
        return url in self._folders[folder]


def _resolve_audio(manifest: Loc, audio: str) -> Loc:
    """An audio reference of a manifest row: a URL stays a URL; a relative path is relative to the manifest."""
    if fs.is_remote(audio):
        return audio.rstrip("/")
    if isinstance(manifest, Path) or os.path.isabs(audio):
        base = manifest.parent if isinstance(manifest, Path) else Path("/")
        return (base / audio).resolve()
    parent = fs.parent(manifest)
    proto, rest = parent.split("://", 1)
    bucket, _, prefix = rest.partition("/")
    key = posixpath.normpath(posixpath.join("/", prefix, audio)).lstrip("/")
    return f"{proto}://{bucket}/{key}"


def read_table(manifest: str | Path, rows: Iterable[dict]) -> tuple[list[CorpusItem], list[ScanReject]]:
    """JSONL/CSV manifest rows → items; rows missing an id, audio or text become rejects."""
    return collect_reads(iter_table(manifest, rows))


def iter_table(manifest: str | Path, rows: Iterable[dict]) -> Iterator[Read]:
    """:func:`read_table` row by row."""
    manifest = _loc(manifest)
    listing = _RemoteListing()
    name, stem = _name(manifest), _stem(manifest)
    for n, row in enumerate(rows, start=1):
        utt_id = _first(row, "id", "utt_id")
        audio = _first(row, "audio_path", "audio", "path")
        text = _first(row, "text", "transcript")
        if "_bad" in row or utt_id is None or audio is None:
            yield ScanReject(utt_id or f"{name}:line{row.get('_line', n)}", str(manifest), "bad_manifest_line",
                             str(row.get("_bad", row))[:200])
            continue
        audio_path = _resolve_audio(manifest, audio)
        if not (audio_path.exists() if isinstance(audio_path, Path) else listing.exists(audio_path)):
            yield ScanReject(utt_id, str(audio_path), "missing_audio", "audio path does not exist")
            continue
        duration = _first(row, "duration_s")
        yield CorpusItem(utt_id, str(audio_path), text or "", _first(row, "speaker") or stem, stem,
                         float(_first(row, "start_s") or 0.0), float(duration) if duration else None)


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
