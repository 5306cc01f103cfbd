"""Integration: the build_dataset Prefect flow on real speech, with the real pocketsphinx aligner.

Reads the shards back with webdataset and the manifest with pyarrow; checks byte-identical
rebuilds, the no-change skip, and that changing one input re-aligns only that input.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from configs.dataset import DatasetConfig
from data.manifest import read_manifest, read_rejects
from data.shards import iter_shard_samples
from flows.build_dataset import run_build
from conftest import copy_realspeech_subset

N_LJ = 8


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, realspeech: Path) -> Path:
    """8 LJSpeech + 6 CMU ARCTIC utterances copied to a temp folder (never into the repo)."""
    return copy_realspeech_subset(tmp_path_factory.mktemp("corpus"), realspeech, {"ljspeech": N_LJ, "cmu_arctic": 6})


def _cfg(**kw) -> DatasetConfig:
    return DatasetConfig(**{"name": "real", "shard_size": 4, "align_batch_size": 4, "split_by": "utterance", **kw})


def test_build_reads_back_and_is_reproducible(prefect_server, small_corpus: Path, tmp_path: Path):
    first = run_build(str(small_corpus), str(tmp_path / "a"), _cfg(), workers=2)
    assert not first["skipped"] and first["aligned_now"] == 14
    counts = first["counts"]
    assert counts["inputs"] == 14 == counts["accepted"] + counts["rejected"]
    assert counts["accepted"] >= 13, counts

    version_dir = Path(first["version_dir"])
    manifest = read_manifest(version_dir)
    assert manifest.num_rows == counts["accepted"]
    assert len(read_rejects(version_dir)) == counts["rejected"]
    rows = {r["id"]: r for r in manifest.to_pylist()}
    # the card names every speaker that is in more than one split (here: a split by utterance)
    splits_of: dict[str, set[str]] = {}
    for r in rows.values():
        splits_of.setdefault(f"{r['corpus']}/{r['speaker']}", set()).add(r["split"])
    assert counts["speakers_in_several_splits"] == sorted(s for s, v in splits_of.items() if len(v) > 1)

    # every manifest row points at its sample in its shard, and the shard holds the same data
    shard_paths = sorted(version_dir.glob("shards/*.tar"))
    seen = 0
    for sample in iter_shard_samples(shard_paths):
        row = rows[sample["meta"]["id"]]
        assert sample["__key__"] == row["key"] and "." not in row["key"]
        assert sample["meta"]["token_ids"] == row["token_ids"]
        assert len(row["token_end_ms"]) == len(row["token_ids"])
        assert row["token_end_ms"] == sorted(row["token_end_ms"])
        assert row["token_end_ms"][-1] == row["words"][-1]["end_ms"] <= row["duration_ms"] + 10
        assert abs(len(sample["audio"]) / 16 - row["duration_ms"]) <= 1
        seen += 1
    assert seen == manifest.num_rows

    # the real audio survives the trip (16-bit source → 16-bit FLAC is lossless)
    lj = rows["LJ001-0001"]
    source, rate = sf.read(lj["source_path"], dtype="float32")
    stored = next(s for s in iter_shard_samples(shard_paths) if s["meta"]["id"] == "LJ001-0001")["audio"]
    assert rate == 16000 and np.array_equal(source, stored)

    # a clean second build in another place is byte-identical
    second = run_build(str(small_corpus), str(tmp_path / "b"), _cfg(), workers=2)
    assert second["version_id"] == first["version_id"]
    assert second["shards"] == first["shards"]
    for name in ("manifest.parquet", "rejects.parquet", "dataset.json"):
        a = hashlib.sha256((version_dir / name).read_bytes()).hexdigest()
        b = hashlib.sha256((Path(second["version_dir"]) / name).read_bytes()).hexdigest()
        assert a == b, name

    # nothing changed: the existing version is verified and returned without work
    again = run_build(str(small_corpus), str(tmp_path / "a"), _cfg(), workers=2)
    assert again["skipped"] and again["version_id"] == first["version_id"]

    # a different config is a different dataset version
    other = run_build(str(small_corpus), str(tmp_path / "a"), _cfg(shard_size=5), workers=2)
    assert other["version_id"] != first["version_id"] and other["aligned_now"] == 0


def test_changing_one_input_realigns_only_that_input(prefect_server, realspeech: Path, tmp_path: Path):
    # 5 utterances: every check below is relative to the build before it, so the 14 of small_corpus add only aligning
    corpus = copy_realspeech_subset(tmp_path / "corpus", realspeech, {"ljspeech": 2, "cmu_arctic": 3})
    out = tmp_path / "out"
    first = run_build(str(corpus), str(out), _cfg(), workers=2)

    # change one transcript's punctuation only: the alignment (audio + normalized words) is reused,
    # but the manifest's text and Whisper tokens change
    tsv = corpus / "cmu_arctic" / "transcripts.tsv"
    lines = tsv.read_text().splitlines()
    utt, text = lines[2].split("\t")
    lines[2] = f"{utt}\t{text.rstrip('.')}!"
    tsv.write_text("\n".join(lines) + "\n")
    # and one audio file: a little quieter
    wav = corpus / "ljspeech" / "wav" / "LJ001-0002.wav"
    audio, rate = sf.read(wav, dtype="int16")
    sf.write(wav, (audio * 0.5).astype(np.int16), rate, subtype="PCM_16")

    second = run_build(str(corpus), str(out), _cfg(), workers=2)
    assert second["version_id"] != first["version_id"]
    assert second["aligned_ids"] == ["LJ001-0002"]
    assert second["aligned_now"] == 1
    assert second["aligned_now"] + second["reused"] == first["aligned_now"] + first["reused"]
    rows = {r["id"]: r for r in pq.read_table(Path(second["version_dir"]) / "manifest.parquet").to_pylist()}
    old = {r["id"]: r for r in pq.read_table(Path(first["version_dir"]) / "manifest.parquet").to_pylist()}
    assert rows[utt]["transcript"].endswith("!") and rows[utt]["token_ids"] != old[utt]["token_ids"]
    assert rows[utt]["words"] == old[utt]["words"][:-1] + [{**old[utt]["words"][-1], "word": text.split()[-1].rstrip(".") + "!"}]

    # changing the words themselves does need a new alignment
    lines[2] = f"{utt}\t{text.rstrip('.')} again!"
    tsv.write_text("\n".join(lines) + "\n")
    third = run_build(str(corpus), str(out), _cfg(), workers=2)
    assert third["aligned_ids"] == [utt] and third["aligned_now"] == 1


def test_an_in_process_build_sends_no_heartbeats_unless_the_user_set_their_frequency():
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings

    from flows.build_dataset import heartbeat_settings

    assert "heartbeat_frequency" not in get_current_settings().flows.model_fields_set  # the suite sets none
    off = heartbeat_settings()
    assert off == {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
    with temporary_settings(off):
        assert get_current_settings().flows.heartbeat_frequency is None
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60}):  # set by the user: kept
        assert heartbeat_settings() == {}
