"""The read side on object storage, against a real S3-compatible server (moto, a separate process on 127.0.0.1):
corpora, audio, shards, manifests and training's data reader give from ``s3://…`` exactly what they give locally."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data import fs

N_UTTS = 4


def upload_tree(local: Path, url: str) -> None:
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        fs.put_file(str(path), fs.join(url, path.relative_to(local).as_posix()))


@pytest.fixture
def corpus_pair(realspeech: Path, tmp_path: Path, s3_bucket: str) -> tuple[Path, str]:
    """The same small corpus folder locally (links to the shared audio, nothing copied into the repo) and on S3
    (uploaded from the shared folder), with a speakers.tsv, a transcript without audio and audio without one."""
    src = realspeech / "ljspeech"
    lines = src.joinpath("transcripts.tsv").read_text(encoding="utf-8").splitlines()[:N_UTTS]
    ids = [line.split("\t", 1)[0] for line in lines]
    local = tmp_path / "corpus" / "ljspeech"
    (local / "wav").mkdir(parents=True)
    for utt in ids + ["LJ001-0009"]:  # one more audio file than transcript lines
        os.symlink(src / "wav" / f"{utt}.wav", local / "wav" / f"{utt}.wav")
    local.joinpath("transcripts.tsv").write_text("\n".join(lines + ["LJ999-0001\tno audio here", "broken line"])
                                                 + "\n", encoding="utf-8")
    local.joinpath("speakers.tsv").write_text(f"{ids[0]}\tlinda\n", encoding="utf-8")
    url = fs.join(s3_bucket, "corpora", "ljspeech")
    upload_tree(local, url)
    return local, url


def _without_paths(scan) -> tuple[list, list]:
    items = [dataclasses.replace(i, audio_path=fs.name(i.audio_path)) for i in scan.items]
    rejects = [dataclasses.replace(r, source_path=fs.name(r.source_path)) for r in scan.rejects]
    return items, rejects


def test_read_corpus_folder_from_s3(corpus_pair):
    from data.corpus import read_corpus

    local, url = corpus_pair
    here, there = read_corpus(local), read_corpus(url)
    assert len(here.items) == N_UTTS and {r.reason for r in here.rejects} == {
        "missing_audio", "missing_transcript", "bad_manifest_line"}
    assert _without_paths(there) == _without_paths(here)
    assert all(i.audio_path.startswith(url + "/wav/") for i in there.items)
    assert there.items[0].speaker == "linda" and there.items[0].corpus == "ljspeech"
    # a folder of corpus folders, trailing slash and all
    parent = read_corpus(fs.parent(url) + "/")
    assert [i.audio_path for i in parent.items] == [i.audio_path for i in there.items]


def test_read_corpus_manifests_from_s3(corpus_pair):
    from data.corpus import read_corpus

    local, url = corpus_pair
    ids = [i.utt_id for i in read_corpus(local).items]
    rows = [{"id": utt, "audio": f"ljspeech/wav/{utt}.wav", "text": f"text {utt}", "speaker": "s"} for utt in ids]
    rows.append({"id": "gone", "audio": "ljspeech/wav/gone.wav", "text": "x"})
    rows.append({"id": "by-url", "audio": fs.join(url, "wav", f"{ids[0]}.wav"), "text": "absolute URL"})
    manifest = fs.join(fs.parent(url), "list.jsonl")
    fs.write_text(manifest, "\n".join(json.dumps(r) for r in rows) + "\n{not json\n")
    scan = read_corpus(manifest)
    assert [i.utt_id for i in scan.items] == sorted([*ids, "by-url"])
    by_id = {i.utt_id: i for i in scan.items}
    assert by_id[ids[1]].audio_path == fs.join(url, "wav", f"{ids[1]}.wav") and by_id[ids[1]].corpus == "list"
    assert by_id["by-url"].audio_path == fs.join(url, "wav", f"{ids[0]}.wav")
    assert {(r.utt_id, r.reason) for r in scan.rejects} == {("gone", "missing_audio"),
                                                           ("list.jsonl:line7", "bad_manifest_line")}
    # CSV one folder down, with '..' in its relative paths
    csv_url = fs.join(fs.parent(url), "lists", "train.csv")
    fs.write_text(csv_url, "utt_id,path,transcript\r\n" + "".join(f"{u},../ljspeech/wav/{u}.wav,t\r\n" for u in ids))
    scan = read_corpus(csv_url)
    assert [i.audio_path for i in scan.items] == [fs.join(url, "wav", f"{u}.wav") for u in ids] and not scan.rejects
    with pytest.raises(FileNotFoundError):
        read_corpus(fs.join(url, "nothing-here"))


def test_load_audio_and_hash_from_s3(corpus_pair):
    from data.audio import AudioReject, file_sha256, load_audio

    local, url = corpus_pair
    for wav in sorted((local / "wav").iterdir())[:2]:
        remote = fs.join(url, "wav", wav.name)
        a, b = load_audio(wav), load_audio(remote)
        assert b.orig_sample_rate == a.orig_sample_rate and b.notes == a.notes
        np.testing.assert_array_equal(b.samples, a.samples)
        seg_a = load_audio(wav, start_s=0.5, duration_s=0.75)
        seg_b = load_audio(remote, start_s=0.5, duration_s=0.75)
        np.testing.assert_array_equal(seg_b.samples, seg_a.samples)
        assert file_sha256(remote) == file_sha256(wav)
    with pytest.raises(AudioReject) as err:
        load_audio(fs.join(url, "wav", "missing.wav"))
    assert err.value.reason == "unreadable_audio"
    with pytest.raises(AudioReject) as err:
        load_audio(fs.join(url, "wav", f"{sorted((local / 'wav').iterdir())[0].name}"), max_duration_s=0.5)
    assert err.value.reason == "too_long"


def _samples(realspeech: Path, n: int):
    from data.audio import encode_audio, load_audio
    from data.corpus import sample_key
    from data.shards import ShardSample

    lines = (realspeech / "ljspeech" / "transcripts.tsv").read_text(encoding="utf-8").splitlines()[:n]
    out = []
    for line in lines:
        utt, text = line.split("\t", 1)
        audio = load_audio(realspeech / "ljspeech" / "wav" / f"{utt}.wav")
        ms = audio.duration_ms
        meta = {"id": utt, "transcript": text, "words": [{"word": text.split()[0], "start_ms": 0, "end_ms": ms}],
                "token_ids": [1, 2, 3], "token_end_ms": [ms // 3, 2 * ms // 3, ms]}
        out.append((ShardSample(sample_key(utt), encode_audio(audio.samples, "flac"), "flac", meta), audio, text))
    return sorted(out, key=lambda s: s[0].key)


def test_iter_shard_samples_from_s3(realspeech, tmp_path, s3_bucket):
    from data.shards import iter_shard_samples, write_split

    samples = [s for s, _, _ in _samples(realspeech, 3)]
    infos = write_split(tmp_path, "train", samples, shard_size=2)
    upload_tree(tmp_path / "shards", fs.join(s3_bucket, "v", "shards"))
    here = list(iter_shard_samples([tmp_path / i.name for i in infos]))
    there = list(iter_shard_samples([fs.join(s3_bucket, "v", i.name) for i in infos]))
    assert [s["__key__"] for s in there] == [s["__key__"] for s in here] == [s.key for s in samples]
    for a, b in zip(here, there, strict=True):
        assert a["meta"] == b["meta"]
        np.testing.assert_array_equal(a["audio"], b["audio"])
    assert fs.sha256(fs.join(s3_bucket, "v", infos[0].name)) == infos[0].sha256


def test_shards_from_s3_in_a_fresh_process(realspeech, tmp_path, s3_bucket):
    """A Ray worker or subprocess reaches the server from the environment alone (secure mode, no pipes)."""
    from data.shards import write_split

    infos = write_split(tmp_path, "train", [s for s, _, _ in _samples(realspeech, 2)], shard_size=2)
    url = fs.join(s3_bucket, "w", infos[0].name)
    fs.put_file(str(tmp_path / infos[0].name), url)
    code = ("import sys; from data.shards import iter_shard_samples; "
            "print(','.join(s['__key__'] for s in iter_shard_samples(sys.argv[1:])))")
    out = subprocess.run([sys.executable, "-c", code, url], check=True, capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parent.parent, env={**os.environ, "WDS_SECURE": "1"})
    assert out.stdout.strip().splitlines()[-1] == ",".join(sorted(s.key for s, _, _ in _samples(realspeech, 2)))


def _version_folder(realspeech: Path, root: Path) -> Path:
    """A dataset version made by hand (shards + manifest + rejects + dataset.json), as a build writes one."""
    from data.manifest import MANIFEST_SCHEMA, REJECTS_SCHEMA, write_table
    from data.shards import write_split

    version = root / "tiny-v1"
    samples = _samples(realspeech, 4)
    splits = {"train": samples[:3], "test": samples[3:]}
    rows = []
    for split, group in splits.items():
        infos = write_split(version, split, [s for s, _, _ in group], shard_size=2)
        for index, (sample, audio, text) in enumerate(group):
            info = infos[index // 2]
            rows.append({"id": sample.meta["id"], "key": sample.key, "recording_id": sample.meta["id"],
                         "speaker": "linda", "corpus": "ljspeech", "source_path": f"/src/{sample.key}.wav",
                         "source_sha256": f"src-{sample.key}", "source_start_ms": 0,
                         "audio_sha256": f"clip-{sample.key}", "duration_ms": audio.duration_ms,
                         "sample_rate": 16000, "orig_sample_rate": audio.orig_sample_rate, "orig_channels": 1,
                         "notes": list(audio.notes), "transcript": text, "normalized_transcript": text.lower(),
                         "words": sample.meta["words"], "token_ids": sample.meta["token_ids"],
                         "token_end_ms": sample.meta["token_end_ms"], "tokenizer": "gpt2", "aligner": "none",
                         "aligner_version": "0", "split": split, "shard": info.name, "offset": index % 2})
    write_table(version / "manifest.parquet", rows, MANIFEST_SCHEMA)
    write_table(version / "rejects.parquet", [{"id": "bad", "source_path": "/x.wav", "source_sha256": "0",
                                               "stage": "prepare", "reason": "too_long", "detail": ""}],
                REJECTS_SCHEMA)
    (version / "dataset.json").write_text(json.dumps({
        "version_id": "tiny-v1", "config": {"name": "tiny", "tokenizer": "gpt2"},
        "counts": {"accepted": len(rows)}, "tokenizer": "gpt2"}))
    return version


def test_training_reads_a_dataset_version_from_s3(realspeech, tmp_path, s3_bucket):
    from data.leakage import check_held_out
    from data.manifest import read_manifest, read_rejects
    from data.utterances import dataset_ref, read_all, read_utterances
    from evaluation.sets import describe, load_split, split_sha256

    local = _version_folder(realspeech, tmp_path)
    url = fs.join(s3_bucket, "datasets", "tiny", "tiny-v1")
    upload_tree(local, url)

    assert read_manifest(url).equals(read_manifest(local)) and read_rejects(url).equals(read_rejects(local))
    ref = dataset_ref(url)
    assert ref == {**dataset_ref(local), "path": url}
    for splits in (["train"], ["test"], ["train", "test"]):
        here, there = read_utterances(local, splits), read_utterances(url, splits)
        assert [u.key for u in there] == [u.key for u in here] and len(here) == {1: 3 if splits == ["train"] else 1,
                                                                                   2: 4}[len(splits)]
        for a, b in zip(here, there, strict=True):
            assert (a.transcript, a.token_ids, a.token_end_ms, a.words, a.dataset_id) == (
                b.transcript, b.token_ids, b.token_end_ms, b.words, b.dataset_id)
            np.testing.assert_array_equal(a.audio, b.audio)
    assert len(read_all([url], ["train"], limit=2)) == 2
    # the evaluation set and the leakage guard read the manifest from S3 too
    utts = load_split([url], ["test"])
    assert describe([url], ["test"], utts) == describe([local], ["test"], load_split([local], ["test"]))
    # which split a report holds, from the manifests alone: the same hash as the loaded utterances'
    assert split_sha256([url], ["test"]) == split_sha256([local], ["test"]) == describe([url], ["test"], utts)[
        "audio_sha256"]
    assert split_sha256([local], ["train", "test"]) == describe([local], ["train", "test"], load_split(
        [local], ["train", "test"]))["audio_sha256"]
    assert check_held_out([url], ["train"], [local], ["test"]) == 0
    assert check_held_out([url], ["train"], [url], ["train"], allow=True) == 3

    from data.utterances import DatasetError

    with pytest.raises(DatasetError, match="dataset.json missing"):
        read_utterances(fs.join(s3_bucket, "datasets", "none"), ["train"])


def test_resolved_paths_keeps_urls():
    from configs.jobs import JobConfig

    cfg = JobConfig(datasets=("s3://b/datasets/x/v1", "rel/dir"), validation_datasets=("s3://b/datasets/y/v2",))
    out = cfg.resolved_paths()
    assert out.datasets == ("s3://b/datasets/x/v1", str(Path("rel/dir").resolve()))
    assert out.validation_datasets == ("s3://b/datasets/y/v2",)
    # a relative sqlite store names another file in a Ray worker's working directory: made absolute; a server kept
    assert JobConfig(datasets=("x",), tracking_uri="sqlite:///rel/mlflow.db").resolved_paths().tracking_uri == \
        f"sqlite:///{Path('rel/mlflow.db').resolve()}"
    assert JobConfig(datasets=("x",), tracking_uri="http://127.0.0.1:5000").resolved_paths().tracking_uri == \
        "http://127.0.0.1:5000"


def test_write_table_to_s3_is_byte_identical(tmp_path, s3_bucket):
    from data.manifest import REJECTS_SCHEMA, read_parquet, write_table

    rows = [{"id": f"u{i}", "source_path": f"/a/{i}.wav", "source_sha256": "0" * 64, "stage": "prepare",
             "reason": "too_long", "detail": "x" * i} for i in range(5)]
    write_table(tmp_path / "rejects.parquet", rows, REJECTS_SCHEMA)
    write_table(fs.join(s3_bucket, "t", "rejects.parquet"), rows, REJECTS_SCHEMA)
    assert fs.read_bytes(fs.join(s3_bucket, "t", "rejects.parquet")) == (tmp_path / "rejects.parquet").read_bytes()
    assert read_parquet(fs.join(s3_bucket, "t", "rejects.parquet")).to_pylist() == rows
