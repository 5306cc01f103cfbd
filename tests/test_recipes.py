"""Corpus recipes through lhotse (data/recipes.py) on real speech, in the layouts the real corpora use.

The corpus trees are built in pytest's temporary folders from the shared real-speech clips (converted to the
formats the corpora ship: flac for LibriSpeech, mp3 for Common Voice); nothing is copied into the repository.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytest.importorskip("lhotse")

from data.corpus import read_corpus  # noqa: E402
from data.recipes import (  # noqa: E402
    RecipeError,
    prepare_commonvoice,
    prepare_librispeech,
    prepare_longform_folder,
)

REPO = Path(__file__).resolve().parents[1]


def _root(env: str, default: str) -> Path:
    path = Path(os.environ.get(env, default))
    if not path.is_absolute() and not path.exists():
        path = REPO / path
    return path


def _tsv(path: Path) -> dict[str, str]:
    return dict(line.split("\t", 1) for line in path.read_text(encoding="utf-8").splitlines() if "\t" in line)


@pytest.fixture(scope="module")
def realspeech() -> Path:
    root = _root("WHISPERLINE_REALSPEECH", "../shared/data/realspeech")
    if not (root / "ljspeech" / "transcripts.tsv").exists():
        pytest.skip(f"real speech corpus not found at {root}; set WHISPERLINE_REALSPEECH")
    return root


@pytest.fixture(scope="module")
def realspeech_more() -> Path:
    root = _root("WHISPERLINE_REALSPEECH_MORE", "../shared/data/realspeech-more")
    if not (root / "librispeech" / "transcripts.tsv").exists():
        pytest.skip(f"realspeech-more (LibriSpeech clips) not found at {root}; set WHISPERLINE_REALSPEECH_MORE")
    return root


# ------------------------------------------------------------------------------------------- LibriSpeech


def test_librispeech_layout_through_lhotse(tmp_path, realspeech_more):
    src = realspeech_more / "librispeech"
    texts = _tsv(src / "transcripts.tsv")
    part = tmp_path / "corpus" / "LibriSpeech" / "dev-clean"
    expected = {}
    for utt_id, text in texts.items():  # ls-1272-128104-0000 → 1272/128104/1272-128104-0000.flac
        ls_id = utt_id.removeprefix("ls-")
        speaker, chapter, _ = ls_id.split("-")
        chapter_dir = part / speaker / chapter
        chapter_dir.mkdir(parents=True, exist_ok=True)
        audio, rate = sf.read(src / "wav" / f"{utt_id}.wav", dtype="int16")
        sf.write(chapter_dir / f"{ls_id}.flac", audio, rate, format="FLAC")
        with (chapter_dir / f"{speaker}-{chapter}.trans.txt").open("a", encoding="utf-8") as fh:
            fh.write(f"{ls_id} {text}\n")
        expected[ls_id] = (text, speaker)
    assert len(expected) == 5
    # a transcript line whose flac is missing: lhotse only logs it, the recipe must report it
    first_trans = next(part.rglob("*.trans.txt"))
    spk, chap = first_trans.name.split(".")[0].split("-")
    with first_trans.open("a", encoding="utf-8") as fh:
        fh.write(f"{spk}-{chap}-9999 A LINE WITHOUT AUDIO\n")

    # the folder `lhotse download librispeech` writes (holding LibriSpeech/) is accepted as well
    prepared = prepare_librispeech(tmp_path / "corpus", tmp_path / "manifests", parts=["dev-clean"])
    assert list(prepared) == ["dev-clean"]
    dev = prepared["dev-clean"]
    assert dev.n_supervisions == 5
    assert dev.recordings.name == "librispeech_recordings_dev-clean.jsonl.gz"
    assert [(p.item, p.reason) for p in dev.problems] == [(f"{spk}-{chap}-9999", "missing_audio")]
    assert (tmp_path / "manifests" / "librispeech_dev-clean.problems.tsv").exists()

    scan = read_corpus(dev.spec)
    assert scan.rejects == ()
    assert {i.utt_id: (i.transcript, i.speaker) for i in scan.items} == expected
    for item in scan.items:
        assert item.audio_path.endswith(f"{item.utt_id}.flac") and Path(item.audio_path).is_absolute()
        assert item.start_s == 0.0 and item.duration_s == pytest.approx(sf.info(item.audio_path).duration)

    with pytest.raises(FileNotFoundError, match="train-clean-100"):
        prepare_librispeech(tmp_path / "corpus", tmp_path / "manifests", parts=["train-clean-100"])
    with pytest.raises(RecipeError, match="9999: missing_audio"):
        prepare_librispeech(tmp_path / "corpus", tmp_path / "strict", parts="dev-clean", strict=True)


# ------------------------------------------------------------------------------------------- Common Voice

# The columns of a Common Voice 17 tsv (lhotse reads client_id, path, sentence, age, gender, accents, variant)
CV_COLUMNS = ["client_id", "path", "sentence_id", "sentence", "sentence_domain", "up_votes", "down_votes", "age",
              "gender", "accents", "variant", "locale", "segment"]


def _cv_row(client: str, clip: str, sentence: str) -> dict[str, str]:
    return {"client_id": client, "path": clip, "sentence_id": clip[:12], "sentence": sentence, "sentence_domain": "",
            "up_votes": "2", "down_votes": "0", "age": "thirties", "gender": "", "accents": "", "variant": "",
            "locale": "en", "segment": ""}


def test_commonvoice_layout_through_lhotse(tmp_path, realspeech):
    """mp3 clips (as Common Voice ships them; libsndfile >= 1.1 encodes and decodes mp3) + CV's split tsvs."""
    lang = tmp_path / "cv-corpus-17.0" / "en"
    (lang / "clips").mkdir(parents=True)
    picks = {"train": [("ljspeech", "LJ001-0002"), ("cmu_arctic", "cmu_us_aew_a0002")],
             "dev": [("ljspeech", "LJ001-0008")], "test": [("cmu_arctic", "cmu_us_axb_a0005")]}
    expected: dict[str, dict[str, tuple[str, str]]] = {}
    for split, utts in picks.items():
        rows = []
        for corpus, utt_id in utts:
            text = _tsv(realspeech / corpus / "transcripts.tsv")[utt_id]
            clip = f"common_voice_en_{utt_id.replace('-', '_')}.mp3"
            audio, rate = sf.read(realspeech / corpus / "wav" / f"{utt_id}.wav", dtype="float32")
            sf.write(lang / "clips" / clip, audio, rate, format="MP3")
            client = f"client-{corpus}"
            rows.append(_cv_row(client, clip, text))
            expected.setdefault(split, {})[Path(clip).stem] = (text, client)
        if split == "train":  # a validated row whose clip never arrived (an interrupted download)
            rows.append(_cv_row("client-x", "common_voice_en_missing.mp3", "lost"))
        with (lang / f"{split}.tsv").open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, CV_COLUMNS, delimiter="\t", quoting=csv.QUOTE_NONE, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)

    prepared = prepare_commonvoice(tmp_path / "cv-corpus-17.0", tmp_path / "manifests", language="en")
    assert list(prepared) == ["train", "dev", "test"]
    assert [(p.item, p.reason) for p in prepared["train"].problems] == [("common_voice_en_missing", "missing_audio")]
    assert prepared["dev"].problems == () and prepared["test"].problems == ()

    from data.audio import load_audio

    for split, want in expected.items():
        scan = read_corpus(prepared[split].spec)
        assert scan.rejects == ()
        assert {i.utt_id: (i.transcript, i.speaker) for i in scan.items} == want
        for item in scan.items:
            assert item.audio_path.endswith(".mp3")
            loaded = load_audio(item.audio_path, start_s=item.start_s, duration_s=item.duration_s)  # the build's reader
            assert abs(len(loaded.samples) / 16000 - item.duration_s) < 0.1
            assert float(np.abs(loaded.samples).max()) > 0.05  # speech, not silence

    # the language folder itself is accepted too
    again = prepare_commonvoice(lang, tmp_path / "manifests2", language="en", splits=["dev"])
    assert again["dev"].n_supervisions == 1
    # an old release without the columns lhotse reads fails clearly, before lhotse's KeyError
    (lang / "other.tsv").write_text("client_id\tpath\tsentence\n", encoding="utf-8")
    with pytest.raises(RecipeError, match="variant"):
        prepare_commonvoice(lang, tmp_path / "manifests3", splits=["other"])


# ------------------------------------------------------------------------------------------- long-form folder


def _write_longform(folder: Path, realspeech: Path) -> dict[str, tuple[str, str, float]]:
    """A meeting over 30 s (five LJ Speech clips with pauses, wav), a short flac, a stereo ogg."""
    folder.mkdir(parents=True)
    lj = _tsv(realspeech / "ljspeech" / "transcripts.tsv")
    ids = sorted(lj)[:5]
    pause = np.zeros(4000, dtype=np.float32)
    pieces = []
    for utt_id in ids:
        audio, rate = sf.read(realspeech / "ljspeech" / "wav" / f"{utt_id}.wav", dtype="float32")
        assert rate == 16000
        pieces += [audio, pause]
    meeting = np.concatenate(pieces)
    sf.write(folder / "linda_meeting-2024-05-03.wav", meeting, 16000)
    (folder / "linda_meeting-2024-05-03.txt").write_text("\n".join(lj[i] for i in ids) + "\n", encoding="utf-8")

    arctic = _tsv(realspeech / "cmu_arctic" / "transcripts.tsv")
    note, _ = sf.read(realspeech / "cmu_arctic" / "wav" / "cmu_us_aew_a0003.wav", dtype="float32")
    sf.write(folder / "note.flac", note, 16000)
    (folder / "note.txt").write_text(arctic["cmu_us_aew_a0003"], encoding="utf-8")
    (folder / "speakers.tsv").write_text("note\taew\n", encoding="utf-8")

    call, _ = sf.read(realspeech / "cmu_arctic" / "wav" / "cmu_us_axb_a0004.wav", dtype="float32")
    sf.write(folder / "bob-call.ogg", np.stack([call, call * 0.5], axis=1), 16000, format="OGG", subtype="VORBIS")
    (folder / "bob-call.txt").write_text(arctic["cmu_us_axb_a0004"], encoding="utf-8")
    return {"linda_meeting-2024-05-03": (" ".join(" ".join(lj[i] for i in ids).split()), "linda",
                                         len(meeting) / 16000),
            "note": (arctic["cmu_us_aew_a0003"], "aew", len(note) / 16000),
            "bob-call": (arctic["cmu_us_axb_a0004"], "bob", len(call) / 16000)}


def test_longform_folder_one_supervision_per_recording(tmp_path, realspeech, s3_bucket):
    folder = tmp_path / "team recordings"
    expected = _write_longform(folder, realspeech)
    assert expected["linda_meeting-2024-05-03"][2] > 30  # the build cuts it, the recipe does not

    prepared = prepare_longform_folder(folder, tmp_path / "manifests")
    assert prepared.name == "longform-team_recordings" and prepared.problems == ()
    scan = read_corpus(prepared.spec)
    assert scan.rejects == ()
    got = {i.utt_id: i for i in scan.items}
    assert set(got) == set(expected)
    for stem, (text, speaker, seconds) in expected.items():
        item = got[stem]
        assert (item.transcript, item.speaker) == (text, speaker)
        assert item.start_s == 0.0
        assert item.duration_s == pytest.approx(seconds, abs=0.01)
        assert item.duration_s == pytest.approx(sf.info(item.audio_path).duration, abs=0.01)

    # the manifests may live in object storage (a real S3 server process): same items
    from data import fs

    remote = {}
    for kind in ("recordings", "supervisions"):
        local = getattr(prepared, kind)
        remote[kind] = f"{s3_bucket}/manifests/{local.name}"
        fs.put_file(local, remote[kind])
    from_s3 = read_corpus(f"lhotse:{remote['recordings']},{remote['supervisions']}")
    assert from_s3 == scan

    from lhotse import load_manifest

    stereo = load_manifest(prepared.recordings)["bob-call"]
    assert stereo.num_channels == 2
    assert load_manifest(prepared.supervisions)["bob-call"].channel == [0, 1]  # whole recording, every channel


def test_longform_folder_reports_bad_inputs(tmp_path, realspeech):
    folder = tmp_path / "calls"
    expected = _write_longform(folder, realspeech)
    audio, _ = sf.read(realspeech / "cmu_arctic" / "wav" / "cmu_us_aew_a0001.wav", dtype="float32")
    sf.write(folder / "orphan.wav", audio, 16000)  # no transcript
    (folder / "broken.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk" * 10)  # unreadable
    (folder / "broken.txt").write_text("some words", encoding="utf-8")
    (folder / "lonely.txt").write_text("a transcript without audio", encoding="utf-8")
    sf.write(folder / "silent-note.flac", audio, 16000)
    (folder / "silent-note.txt").write_text("  \n", encoding="utf-8")  # empty transcript
    sf.write(folder / "note.wav", audio, 16000)  # same stem as note.flac

    prepared = prepare_longform_folder(folder, tmp_path / "manifests")
    reasons = {(p.item, p.reason) for p in prepared.problems}
    assert reasons == {("orphan", "missing_transcript"), ("broken", "unreadable_audio"), ("lonely", "missing_audio"),
                       ("silent-note", "empty_transcript"), ("note", "duplicate_id")}
    assert {i.utt_id for i in read_corpus(prepared.spec).items} == set(expected)
    report = (tmp_path / "manifests" / f"{prepared.name}.problems.tsv").read_text(encoding="utf-8")
    assert "orphan\tmissing_transcript" in report and "broken\tunreadable_audio" in report

    with pytest.raises(RecipeError, match="orphan: missing_transcript"):
        prepare_longform_folder(folder, tmp_path / "strict", strict=True)
    empty = tmp_path / "nothing-usable"
    empty.mkdir()
    sf.write(empty / "a.wav", audio, 16000)
    with pytest.raises(RecipeError, match="no usable recording"):
        prepare_longform_folder(empty, tmp_path / "m")

    # transcripts.tsv instead of .txt files
    tsv_folder = tmp_path / "tsv"
    tsv_folder.mkdir()
    sf.write(tsv_folder / "carol_01.wav", audio, 16000)
    (tsv_folder / "transcripts.tsv").write_text("carol_01\tAuthor of the danger trail\n", encoding="utf-8")
    (item,) = read_corpus(prepare_longform_folder(tsv_folder, tmp_path / "m2").spec).items
    assert (item.utt_id, item.transcript, item.speaker) == ("carol_01", "Author of the danger trail", "carol")


# ------------------------------------------------------------------------------------------- CLI


def test_cli_data_prepare(tmp_path, realspeech):
    from typer.testing import CliRunner

    from flows.cli import app

    folder = tmp_path / "recs"
    expected = _write_longform(folder, realspeech)
    runner = CliRunner()
    result = runner.invoke(app, ["data", "prepare", "longform", str(folder), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    specs = [ln for ln in result.stdout.splitlines() if ln.startswith("lhotse:")]
    assert len(specs) == 1 and result.stdout.strip() == specs[0]  # stdout: just the spec, for scripts
    assert "3 utterances, 0 problem(s)" in result.stderr and "whisperline data build" in result.stderr
    assert {i.utt_id for i in read_corpus(specs[0]).items} == set(expected)

    (folder / "orphan.wav").write_bytes((folder / "note.flac").read_bytes())
    strict = runner.invoke(app, ["data", "prepare", "longform", str(folder), str(tmp_path / "out2"), "--strict"])
    assert strict.exit_code == 1 and "orphan: missing_transcript" in strict.stderr
    lenient = runner.invoke(app, ["data", "prepare", "longform", str(folder), str(tmp_path / "out3")])
    assert lenient.exit_code == 0 and "orphan: missing_transcript" in lenient.stderr

    unknown = runner.invoke(app, ["data", "prepare", "timit", str(folder), str(tmp_path / "out4")])
    assert unknown.exit_code != 0


def test_cli_data_prepare_librispeech(tmp_path, realspeech_more):
    from typer.testing import CliRunner

    from flows.cli import app

    src = realspeech_more / "librispeech"
    utt_id, text = next(iter(_tsv(src / "transcripts.tsv").items()))
    ls_id = utt_id.removeprefix("ls-")
    speaker, chapter, _ = ls_id.split("-")
    chapter_dir = tmp_path / "LibriSpeech" / "test-clean" / speaker / chapter
    chapter_dir.mkdir(parents=True)
    audio, rate = sf.read(src / "wav" / f"{utt_id}.wav", dtype="int16")
    sf.write(chapter_dir / f"{ls_id}.flac", audio, rate)
    (chapter_dir / f"{speaker}-{chapter}.trans.txt").write_text(f"{ls_id} {text}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["data", "prepare", "librispeech", str(tmp_path / "LibriSpeech"),
                                      str(tmp_path / "out"), "--parts", "test-clean"])
    assert result.exit_code == 0, result.output
    (spec,) = result.stdout.split()
    (item,) = read_corpus(spec).items
    assert (item.utt_id, item.transcript, item.speaker) == (ls_id, text, speaker)


# ------------------------------------------------------------------------------------------- read_lhotse


def test_read_lhotse_says_why_it_skips_a_recording(tmp_path, realspeech):
    """Only what the build can read becomes an item; the rest are rejects that name the reason."""
    from lhotse import Recording, RecordingSet, SupervisionSegment, SupervisionSet
    from lhotse.audio import AudioSource

    wav = realspeech / "cmu_arctic" / "wav" / "cmu_us_aew_a0001.wav"
    mono, _ = sf.read(wav, dtype="float32")
    sf.write(tmp_path / "stereo.flac", np.stack([mono, mono], axis=1), 16000)
    plain = Recording.from_file(wav, recording_id="plain")
    stereo = Recording.from_file(tmp_path / "stereo.flac", recording_id="stereo")
    on_s3 = Recording(id="on_s3", sources=[AudioSource("url", [0], "s3://bucket/a.flac")], sampling_rate=16000,
                      num_samples=plain.num_samples, duration=plain.duration)
    on_http = Recording(id="on_http", sources=[AudioSource("url", [0], "https://example.org/a.flac")],
                        sampling_rate=16000, num_samples=plain.num_samples, duration=plain.duration)
    piped = Recording(id="piped", sources=[AudioSource("command", [0], f"sox {wav} -t wav -")],
                      sampling_rate=16000, num_samples=plain.num_samples, duration=plain.duration)
    per_channel = Recording(id="per_channel", sources=[AudioSource("file", [0], str(wav)),
                                                       AudioSource("file", [1], str(wav))],
                            sampling_rate=16000, num_samples=plain.num_samples, duration=plain.duration)
    sped = plain.perturb_speed(1.1)  # id plain_sp1.1, a Speed transform the build would not apply
    recs = RecordingSet.from_recordings([plain, stereo, on_s3, on_http, piped, per_channel, sped])

    def sup(sid, rec, channel=0, start=0.0, duration=1.0):
        return SupervisionSegment(id=sid, recording_id=rec, start=start, duration=duration, channel=channel,
                                  text=f"text {sid}", speaker="spk")

    sups = SupervisionSet.from_segments([
        sup("seg-plain", "plain", start=0.5, duration=1.25), sup("seg-stereo-all", "stereo", channel=[0, 1]),
        sup("seg-stereo-left", "stereo", channel=0), sup("seg-s3", "on_s3"), sup("seg-http", "on_http"),
        sup("seg-piped", "piped"), sup("seg-per-channel", "per_channel"), sup("seg-sped", sped.id),
        sup("seg-orphan", "not-there")])
    recs.to_file(tmp_path / "r.jsonl.gz")
    sups.to_file(tmp_path / "s.jsonl.gz")

    scan = read_corpus(f"lhotse:{tmp_path / 'r.jsonl.gz'},{tmp_path / 's.jsonl.gz'}")
    items = {i.utt_id: i for i in scan.items}
    assert set(items) == {"seg-plain", "seg-stereo-all", "seg-s3"}
    assert (items["seg-plain"].start_s, items["seg-plain"].duration_s) == (0.5, 1.25)
    assert items["seg-plain"].audio_path == str(wav.resolve())
    assert items["seg-s3"].audio_path == "s3://bucket/a.flac"
    rejects = {r.utt_id: r.detail for r in scan.rejects}
    assert set(rejects) == {"seg-stereo-left", "seg-http", "seg-piped", "seg-per-channel", "seg-sped", "seg-orphan"}
    assert all(r.reason == "unsupported_recording" for r in scan.rejects)
    assert "mixes all channels" in rejects["seg-stereo-left"]
    assert "'command'" in rejects["seg-piped"] and "https://example.org" in rejects["seg-http"]
    assert "2 audio sources" in rejects["seg-per-channel"] and "Speed" in rejects["seg-sped"]
    assert "not-there" in rejects["seg-orphan"]
