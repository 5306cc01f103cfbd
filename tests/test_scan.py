"""The streaming scan (data/scan.py) keeps and rejects exactly what the list-based reading does, in any order."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data import scan as scan_mod
from data.corpus import CorpusItem, _dedupe, iter_corpus, read_corpus
from data.scan import hash_audio, item_table, reject_duplicates, rows_of, scan

ID_PARTS = st.sampled_from(["a", "b", "a.b", "a_b", "a b", "é", "x-1"])


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.tuples(ID_PARTS, ID_PARTS, st.integers(0, 2)), max_size=40), seed=st.integers(0, 99))
def test_duplicates_are_the_ones_the_list_dedupe_rejects(ids, seed):
    """Ids that differ only in characters a shard key replaces ("a.b", "a_b", "a b") collide; the one kept is the
    first in (utt_id, audio_path) order, whatever the reading order."""
    items = [CorpusItem(f"{p}{q}", f"/audio/{p}{q}-{n}.wav", "words", "spk", "c") for p, q, n in ids]
    random.Random(seed).shuffle(items)
    expected = _dedupe(items, [])
    keep, rejects = reject_duplicates(item_table(items))
    kept = [i for i, k in zip(items, keep.to_pylist()) if k]
    assert sorted(kept, key=lambda i: (i.utt_id, i.audio_path)) == list(expected.items)
    assert sorted((r.utt_id, r.source_path, r.reason, r.detail) for r in rejects) == sorted(
        (r.utt_id, r.source_path, r.reason, r.detail) for r in expected.rejects)


def test_a_corpus_scans_to_the_items_read_corpus_gives(tmp_path: Path, monkeypatch):
    """Across record-batch boundaries (CHUNK set small): every readable item once, with its hash; the reader's
    rejects, the duplicates and the unreadable files each with their reason."""
    monkeypatch.setattr(scan_mod, "CHUNK", 3)
    wav = tmp_path / "wav"
    wav.mkdir()
    rows = []
    for i in range(11):
        (wav / f"u{i}.wav").write_bytes(f"RIFF{i}".encode())
        rows.append({"id": f"u{i}", "audio": f"wav/u{i}.wav", "text": f"words {i}", "speaker": f"s{i % 3}"})
    rows.append({"id": "u.3", "audio": "wav/u3.wav", "text": "kept: the first id of its shard key"})
    rows.append({"id": "u_3", "audio": "wav/u4.wav", "text": "collides with u.3"})
    rows.append({"id": "gone", "audio": "wav/none.wav", "text": "missing audio"})
    rows.append({"id": "locked", "audio": "wav/u5.wav", "text": "unreadable"})
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")

    def fake_hash(path: str) -> str:
        if path.endswith("u5.wav"):
            raise PermissionError(f"[Errno 13] Permission denied: {path!r}")
        return Path(path).name.upper()

    table, rejects = scan(str(manifest), fake_hash)
    listed = read_corpus(manifest)
    readable = [i for i in listed.items if not i.audio_path.endswith("u5.wav")]
    got = sorted(rows_of(table), key=lambda r: r["utt_id"])
    assert [r["utt_id"] for r in got] == [i.utt_id for i in readable]
    assert all(r["source_sha256"] == Path(r["audio_path"]).name.upper() for r in got)
    reasons = sorted((r.utt_id, r.reason) for r in rejects)
    assert reasons == sorted([*((r.utt_id, r.reason) for r in listed.rejects), ("locked", "unreadable_audio"),
                              ("u5", "unreadable_audio")])
    assert {"duplicate_id", "missing_audio", "bad_manifest_line"} <= {r for _, r in reasons}
    assert table.num_rows + len(rejects) == len(rows) + 1  # counts reconcile: every line is kept or rejected


def test_readers_stream(tmp_path: Path):
    """iter_corpus yields before it has read the whole folder (nothing is collected first)."""
    (tmp_path / "wav").mkdir()
    lines = []
    for i in range(5):
        (tmp_path / "wav" / f"u{i}.wav").write_bytes(b"x")
        lines.append(f"u{i}\tword {i}")
    (tmp_path / "transcripts.tsv").write_text("\n".join(lines) + "\n")
    reads = iter_corpus(tmp_path)
    first = next(reads)
    assert isinstance(first, CorpusItem) and first.utt_id == "u0"
    assert len([first, *reads]) == 5


def test_hashes_are_kept_only_for_kept_rows(tmp_path: Path):
    items = [CorpusItem(f"u{i}", f"/a/{i}.wav", "w", "s", "c") for i in range(4)]
    table = item_table(items)
    import pyarrow as pa

    sums, rejects = hash_audio(table, pa.array([True, False, True, True]), lambda p: p[-5:])
    assert sums.to_pylist() == ["0.wav", None, "2.wav", "3.wav"] and rejects == []
