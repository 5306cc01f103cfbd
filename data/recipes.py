"""Corpus recipes through lhotse: raw corpus on disk → lhotse manifests → the ``lhotse:`` spec `read_corpus` takes.

Plain functions, as lhotse's own recipes:
- `prepare_librispeech` and `prepare_commonvoice` wrap ``lhotse.recipes.prepare_librispeech`` /
  ``prepare_commonvoice`` (the same manifests as ``lhotse prepare librispeech|commonvoice``);
- `prepare_longform_folder` turns a team's own recordings (a folder of wav/flac/ogg/mp3 files, each with a
  same-stem ``.txt`` transcript or one line in ``transcripts.tsv``) into a RecordingSet and a SupervisionSet with
  one supervision per recording over the whole file (the build cuts recordings longer than 30 s itself).

Every function returns `PreparedCorpus` values whose ``spec`` goes to ``whisperline data build``. What could not
be used (a transcript line without audio, audio without a transcript, an unreadable file: lhotse's recipes only
log a warning for missing audio) is returned in ``problems`` and written to ``<name>.problems.tsv`` beside the
manifests; ``strict=True`` raises instead. lhotse (the optional ``lhotse`` extra) is imported inside each recipe,
so this module loads without it.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from data.corpus import AUDIO_SUFFIXES, speaker_from_id

# Columns lhotse 1.x's Common Voice recipe reads from every row (a release without them fails inside lhotse)
COMMONVOICE_COLUMNS = ("client_id", "path", "sentence", "age", "gender", "accents", "variant")


@dataclass(frozen=True, slots=True)
class Problem:
    item: str  # utterance / recording id
    path: str
    reason: str  # missing_audio | missing_transcript | unreadable_audio | empty_transcript | bad_line | duplicate_id
    detail: str


@dataclass(frozen=True, slots=True)
class PreparedCorpus:
    name: str
    recordings: Path
    supervisions: Path
    n_supervisions: int
    problems: tuple[Problem, ...] = ()

    @property
    def spec(self) -> str:
        """What ``whisperline data build`` / `read_corpus` take."""
        return f"lhotse:{self.recordings},{self.supervisions}"


class RecipeError(ValueError):
    """Inputs a recipe refuses (only with strict=True, or when nothing usable is left)."""


def _finish(name: str, output_dir: Path, recordings: Path, supervisions: Path, n: int,
            problems: list[Problem], strict: bool) -> PreparedCorpus:
    problems.sort(key=lambda p: (p.item, p.reason))
    report = output_dir / f"{name}.problems.tsv"
    if problems:
        with report.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
            writer.writerow(["item", "reason", "path", "detail"])
            writer.writerows([p.item, p.reason, p.path, p.detail] for p in problems)
    else:
        report.unlink(missing_ok=True)
    if strict and problems:
        raise RecipeError(f"{name}: {len(problems)} input(s) unusable (see {report}): "
                          + "; ".join(f"{p.item}: {p.reason}" for p in problems[:10]))
    return PreparedCorpus(name, recordings, supervisions, n, tuple(problems))


def _supervision_ids(path: Path) -> set[str]:
    from lhotse import load_manifest

    return {s.id for s in load_manifest(path)}


# ----------------------------------------------------------------------------------------------- LibriSpeech


def prepare_librispeech(corpus_dir: str | Path, output_dir: str | Path, parts: str | Sequence[str] = "auto",
                        *, normalize_text: str = "none", num_jobs: int = 1,
                        strict: bool = False) -> dict[str, PreparedCorpus]:
    """LibriSpeech (or mini LibriSpeech) parts → ``librispeech_{recordings,supervisions}_<part>.jsonl.gz``.

    ``corpus_dir`` is the ``LibriSpeech`` folder (``<part>/<speaker>/<chapter>/*.flac`` + ``*.trans.txt``) or the
    folder holding it (what ``lhotse download librispeech DIR`` writes). ``parts``: "auto" (all found), one part
    or a list (dev-clean, test-clean, train-clean-100, …). Parts already prepared in ``output_dir`` are reused.
    """
    from lhotse.recipes import prepare_librispeech as lhotse_prepare

    corpus = Path(corpus_dir).expanduser().resolve()
    if (corpus / "LibriSpeech").is_dir():
        corpus = corpus / "LibriSpeech"
    if not corpus.is_dir():
        raise FileNotFoundError(f"no LibriSpeech folder at {corpus}")
    out = Path(output_dir).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    if parts != "auto":
        wanted = [parts] if isinstance(parts, str) else list(parts)
        missing = [p for p in wanted if not (corpus / p).is_dir()]
        if missing:
            raise FileNotFoundError(f"LibriSpeech part(s) {missing} not in {corpus} "
                                    f"(found: {sorted(p.name for p in corpus.iterdir() if p.is_dir())})")
        parts = wanted
    manifests = lhotse_prepare(corpus, dataset_parts=parts, output_dir=out, normalize_text=normalize_text,
                               num_jobs=num_jobs)
    prepared = {}
    for part in sorted(manifests):
        recordings = out / f"librispeech_recordings_{part}.jsonl.gz"
        supervisions = out / f"librispeech_supervisions_{part}.jsonl.gz"
        have = _supervision_ids(supervisions)
        problems = []
        for trans in sorted((corpus / part).rglob("*.trans.txt")):
            for n, line in enumerate(trans.read_text(encoding="utf-8").splitlines(), start=1):
                utt_id, _, text = line.strip().partition(" ")
                if not utt_id:
                    continue
                if not text.strip():
                    problems.append(Problem(utt_id, str(trans), "bad_line", f"line {n} has no transcript"))
                elif utt_id not in have:
                    problems.append(Problem(utt_id, str(trans.parent / f"{utt_id}.flac"), "missing_audio",
                                            "transcript line without a readable .flac"))
        listed = {p.item for p in problems} | have
        for flac in sorted((corpus / part).rglob("*.flac")):
            if flac.stem not in listed:
                problems.append(Problem(flac.stem, str(flac), "missing_transcript", "no line in the *.trans.txt"))
        prepared[part] = _finish(f"librispeech_{part}", out, recordings, supervisions, len(have), problems, strict)
    return prepared


# ----------------------------------------------------------------------------------------------- Common Voice


def prepare_commonvoice(corpus_dir: str | Path, output_dir: str | Path, language: str = "en",
                        splits: str | Sequence[str] = ("train", "dev", "test"), *, num_jobs: int = 1,
                        strict: bool = False) -> dict[str, PreparedCorpus]:
    """A Common Voice release → ``cv-<lang>_{recordings,supervisions}_<split>.jsonl.gz`` per split.

    ``corpus_dir`` is the unpacked release (``cv-corpus-<version>/``, holding ``<language>/clips/*.mp3`` and
    ``<language>/<split>.tsv``) or its ``<language>`` folder. ``splits``: train, dev, test, validated, other,
    invalidated. Reading the mp3 clips needs libsndfile ≥ 1.1 (soundfile ≥ 0.12 wheels) or torchaudio + ffmpeg.
    """
    from lhotse.recipes import prepare_commonvoice as lhotse_prepare

    root = Path(corpus_dir).expanduser().resolve()
    if root.name == language and (root / "clips").is_dir():
        root = root.parent
    lang_dir = root / language
    if not (lang_dir / "clips").is_dir():
        raise FileNotFoundError(f"no Common Voice '{language}' folder with clips/ in {root}")
    wanted = [splits] if isinstance(splits, str) else list(splits)
    for split in wanted:
        tsv = lang_dir / f"{split}.tsv"
        if not tsv.is_file():
            raise FileNotFoundError(f"{tsv} not found")
        with tsv.open(encoding="utf-8") as fh:
            header = fh.readline().rstrip("\n").split("\t")
        if missing := [c for c in COMMONVOICE_COLUMNS if c not in header]:
            raise RecipeError(f"{tsv}: columns {missing} missing (lhotse reads {list(COMMONVOICE_COLUMNS)}; "
                              "releases before Common Voice 13 lack some of them)")
    out = Path(output_dir).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    lhotse_prepare(root, out, languages=[language], splits=wanted, num_jobs=num_jobs)
    prepared = {}
    for split in wanted:
        recordings = out / f"cv-{language}_recordings_{split}.jsonl.gz"
        supervisions = out / f"cv-{language}_supervisions_{split}.jsonl.gz"
        have = _supervision_ids(supervisions)
        problems = []
        with (lang_dir / f"{split}.tsv").open(encoding="utf-8") as fh:
            for row in csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
                clip = row.get("path") or ""
                if Path(clip).stem not in have:
                    problems.append(Problem(Path(clip).stem, str(lang_dir / "clips" / clip), "missing_audio",
                                            f"{split}.tsv row without a readable clip"))
        prepared[split] = _finish(f"cv-{language}_{split}", out, recordings, supervisions, len(have), problems,
                                  strict)
    return prepared


# ----------------------------------------------------------------------------------------------- long-form folder

_SPEAKER_PREFIX = re.compile(r"^(?P<speaker>[^_\-.\s]+)[_\-.\s]")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def _tsv(path: Path, problems: list[Problem]) -> dict[str, str]:
    rows: dict[str, str] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        key, tab, value = line.partition("\t")
        if not tab or not key.strip():
            problems.append(Problem(f"{path.name}:line{n}", str(path), "bad_line", line[:200]))
            continue
        rows[key.strip()] = value.strip()
    return rows


def longform_speaker(stem: str, speakers: dict[str, str]) -> str:
    """speakers.tsv, else a speaker id a public corpus puts in the name, else the stem's prefix before the first
    ``_``/``-``/``.`` (``alice_2024-05-03`` → ``alice``), else "unknown"."""
    if stem in speakers:
        return speakers[stem]
    if known := speaker_from_id(stem):
        return known
    m = _SPEAKER_PREFIX.match(stem)
    return m.group("speaker") if m else "unknown"


def prepare_longform_folder(folder: str | Path, output_dir: str | Path, *, name: str | None = None,
                            language: str | None = None, strict: bool = False) -> PreparedCorpus:
    """A folder of recordings → ``<name>_{recordings,supervisions}.jsonl.gz``, one supervision per recording.

    Transcripts: ``transcripts.tsv`` (``stem<TAB>text``) if present, else ``<stem>.txt`` beside the audio (its
    lines joined by spaces). Speakers: optional ``speakers.tsv`` (``stem<TAB>speaker``), else see
    `longform_speaker`. Audio without a transcript, a transcript without audio, an empty transcript, a file
    lhotse cannot read and two files with one stem are returned as problems (and written to
    ``<name>.problems.tsv``), never dropped silently; ``strict=True`` raises on any of them.
    """
    from lhotse import Recording, RecordingSet, SupervisionSegment, SupervisionSet
    from lhotse.qa import validate_recordings_and_supervisions

    src = Path(folder).expanduser().resolve()
    if not src.is_dir():
        raise FileNotFoundError(f"no folder {src}")
    out = Path(output_dir).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    name = name or f"longform-{_NAME_UNSAFE.sub('_', src.name).strip('_') or 'corpus'}"
    problems: list[Problem] = []

    audio: dict[str, Path] = {}
    for path in sorted(p for p in src.iterdir() if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES):
        if path.stem in audio:
            problems.append(Problem(path.stem, str(path), "duplicate_id", f"{audio[path.stem].name} has the same stem"))
            continue
        audio[path.stem] = path
    speakers = _tsv(src / "speakers.tsv", problems) if (src / "speakers.tsv").is_file() else {}
    if (src / "transcripts.tsv").is_file():
        texts = _tsv(src / "transcripts.tsv", problems)
        text_source = {stem: src / "transcripts.tsv" for stem in texts}
    else:
        text_files = {p.stem: p for p in sorted(src.glob("*.txt"))}
        texts = {stem: " ".join(p.read_text(encoding="utf-8").split()) for stem, p in text_files.items()}
        text_source = text_files
    for stem in sorted(set(texts) - set(audio)):
        problems.append(Problem(stem, str(text_source[stem]), "missing_audio", "transcript without an audio file"))

    recordings, supervisions = [], []
    for stem, path in audio.items():
        text = texts.get(stem)
        if text is None:
            problems.append(Problem(stem, str(path), "missing_transcript",
                                    "no transcripts.tsv line" if (src / "transcripts.tsv").is_file()
                                    else f"no {stem}.txt beside it"))
            continue
        if not text.strip():
            problems.append(Problem(stem, str(path), "empty_transcript", f"empty transcript in {text_source[stem]}"))
            continue
        try:
            rec = Recording.from_file(path, recording_id=stem)
            if rec.num_samples <= 0:
                raise ValueError("no samples")
        except Exception as err:  # lhotse / libsndfile raise many types for junk files
            problems.append(Problem(stem, str(path), "unreadable_audio", f"{type(err).__name__}: {err}"[:300]))
            continue
        channel = rec.channel_ids[0] if len(rec.channel_ids) == 1 else list(rec.channel_ids)
        recordings.append(rec)
        supervisions.append(SupervisionSegment(id=stem, recording_id=stem, start=0.0, duration=rec.duration,
                                               channel=channel, text=text, language=language,
                                               speaker=longform_speaker(stem, speakers)))
    if not recordings:
        raise RecipeError(f"{src}: no usable recording ({len(problems)} problem(s): "
                          + "; ".join(f"{p.item}: {p.reason}" for p in problems[:10]) + ")")
    recording_set = RecordingSet.from_recordings(recordings)
    supervision_set = SupervisionSet.from_segments(supervisions)
    validate_recordings_and_supervisions(recording_set, supervision_set)
    rec_path = out / f"{name}_recordings.jsonl.gz"
    sup_path = out / f"{name}_supervisions.jsonl.gz"
    recording_set.to_file(rec_path)
    supervision_set.to_file(sup_path)
    return _finish(name, out, rec_path, sup_path, len(supervisions), problems, strict)


def specs(prepared: PreparedCorpus | dict[str, PreparedCorpus] | Iterable[PreparedCorpus]) -> list[str]:
    """The ``lhotse:`` specs of what a recipe returned, in order."""
    if isinstance(prepared, PreparedCorpus):
        return [prepared.spec]
    values = prepared.values() if isinstance(prepared, dict) else prepared
    return [p.spec for p in values]
