"""Joined utterances on real speech: one clip after another, every word and token time moved with its clip, and
the sample points of the joined clip supervised as the parts were."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from whisper.tokenizer import get_tokenizer

from configs.finetune import JoinSettings
from data.tokens import word_tokens
from evaluation.sets import load_realspeech
from data.utterances import TrainUtterance
from training.causal.data import SAMPLE_RATE, collate, padded_mel
from training.causal.join import join, join_utterances
from training.causal.samples import IGNORE


@pytest.fixture(scope="module")
def parts(realspeech) -> list[TrainUtterance]:
    """Three real clips with tiny.en's token ids, each token ending where its word ends."""
    out = []
    for u in load_realspeech(realspeech, ("cmu_arctic",), limit={"cmu_arctic": 3}):
        groups = word_tokens("english", [w for w, _, _ in u.words])
        ids = tuple(t for g in groups for t in g)
        ends = tuple(e for g, (_, _, e) in zip(groups, u.words) for _ in g)
        out.append(TrainUtterance(u.utt_id, "test", u.audio, u.reference, ids, ends, tuple(u.words)))
    return out


def test_off_draws_nothing(parts):
    rng = np.random.default_rng(0)
    assert join(parts[0], parts, JoinSettings(p=0), rng) is parts[0]
    assert rng.random() == np.random.default_rng(0).random()  # the generator was not touched


def test_joined_audio_and_every_time_moved_exactly(parts):
    a, b, c = parts
    out = join_utterances([a, b, c], [300, 0])
    gap = 300 * SAMPLE_RATE // 1000
    np.testing.assert_array_equal(out.audio, np.concatenate([a.audio, np.zeros(gap, np.float32), b.audio, c.audio]))
    shift_b = len(a.audio) * 1000 // SAMPLE_RATE + 300
    shift_c = (len(a.audio) + gap + len(b.audio)) * 1000 // SAMPLE_RATE
    assert out.token_ids == a.token_ids + b.token_ids + c.token_ids
    assert out.token_end_ms == (a.token_end_ms + tuple(t + shift_b for t in b.token_end_ms)
                                + tuple(t + shift_c for t in c.token_end_ms))
    assert out.words[len(a.words)] == (b.words[0][0], b.words[0][1] + shift_b, b.words[0][2] + shift_b)
    assert list(out.token_end_ms) == sorted(out.token_end_ms)  # still non-decreasing: tokens_done bisects them
    assert out.transcript == " ".join(p.transcript for p in parts)
    assert out.key == "+".join(p.key for p in parts) and out.speech_end_ms == c.speech_end_ms + shift_c
    # the tokens still say the joined words
    text = get_tokenizer(False).decode(list(out.token_ids)).split()
    assert text == [w for w, _, _ in out.words]
    with pytest.raises(ValueError, match="gaps"):
        join_utterances([a, b], [])


def test_join_is_seeded_and_bounded(parts):
    s = JoinSettings(p=1, max_utterances=3, gap_ms=(100, 200))
    drawn = [join(parts[0], parts, s, np.random.default_rng([5, k])) for k in range(20)]
    again = [join(parts[0], parts, s, np.random.default_rng([5, k])) for k in range(20)]
    assert [d.key for d in drawn] == [d.key for d in again]
    counts = {d.key.count("+") + 1 for d in drawn}
    assert counts == {2, 3}  # 1 or 2 clips after the first, never more than max_utterances
    assert all(d.key.startswith(parts[0].key + "+") for d in drawn)
    short = JoinSettings(p=1, max_s=(parts[0].speech_end_ms + 100) / 1000)  # no room for a second clip
    assert join(parts[0], parts, short, np.random.default_rng(1)) is parts[0]
    with pytest.raises(ValidationError):
        JoinSettings(gap_ms=(300, 100))


def test_sample_points_of_a_joined_clip_supervise_each_part(parts):
    tok = get_tokenizer(False)
    prefix = [*tok.sot_sequence, tok.no_timestamps]
    a, b = parts[:2]
    out = join_utterances([a, b], [500])
    mel = padded_mel(out.audio, out.speech_end_ms, 1000, 80)
    batch = collate([out], [mel], chunk_ms=300, tau0_ms=600, fraction=1.0, margin_ms=1000, prefix=prefix,
                    eot=tok.eot, rng=np.random.default_rng(0))
    b_start = len(a.audio) * 1000 // SAMPLE_RATE + 500 + b.words[0][2]  # where b's first word ends
    between = 0
    for frames, labels in zip(batch.row_frames.tolist(), batch.labels.tolist()):
        said = [t for t in labels if t not in (IGNORE, tok.eot)]
        ms = frames * 20
        if a.speech_end_ms <= ms < b_start:  # between the clips: all of a said, then wait
            assert said == list(a.token_ids) and [t for t in labels if t != IGNORE][-1] == tok.eot
            between += 1
    assert between >= 2
    last = max(range(len(batch.row_frames)), key=lambda i: int(batch.row_frames[i]))
    assert [t for t in batch.labels[last].tolist() if t not in (IGNORE, tok.eot)] == list(out.token_ids)
