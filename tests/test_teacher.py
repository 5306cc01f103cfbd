"""A larger teacher with its own vocabulary (base, multilingual) distilling into tiny.en: the token map, the rows
the teacher reads, its distribution carried back, and the loss on real weights and real speech."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
import torch.nn.functional as F
from whisper.tokenizer import get_tokenizer

from configs.finetune import DistillSettings, FinetuneConfig, LoraSettings
from training.causal.objective import SamplePointLoss
from training.causal.samples import IGNORE, pad_rows, target_row
from training.causal.teacher import VocabMap, kl_teacher_student, load_teacher
from training.lora import apply_lora
from training.weights import load_model

from test_distill import TEXT, _batch as distill_batch

pytestmark = pytest.mark.usefixtures("one_torch_thread")
N_VOCAB = 51864  # tiny.en


@pytest.fixture(scope="module")
def student_tok():
    return get_tokenizer(False)


@pytest.fixture(scope="module")
def teacher():
    return load_teacher("base")


@pytest.fixture(scope="module")
def vocab(student_tok, teacher) -> VocabMap:
    return VocabMap.between(student_tok, teacher[1], N_VOCAB)


def test_the_map_reads_english_as_the_teacher_would(vocab, student_tok, teacher):
    teacher_tok = teacher[1]
    assert 25_000 < vocab.shared < student_tok.eot  # two BPEs over the same bytes: most, not all, tokens shared
    for text in (TEXT, " The quick brown fox jumps over the lazy dog.", " Call 911, then say forty-two!"):
        read = [t for i in student_tok.encode(text) for t in vocab.pieces[i]]
        assert read == teacher_tok.encode(text)  # other ids; " phil" (the teacher lacks it) as its " ph" "il"
    (phil,) = student_tok.encode(" phil")
    assert int(vocab.to_teacher[phil]) == -1 and len(vocab.pieces[phil]) == 2
    assert int(vocab.to_teacher[student_tok.eot]) == teacher_tok.eot
    assert vocab.teacher_prefix == (*teacher_tok.sot_sequence, teacher_tok.no_timestamps)
    assert len(vocab.teacher_prefix) > len(vocab.student_prefix)  # language and task tokens


def test_rows_move_the_labels_to_the_end_of_the_same_text(vocab, student_tok):
    words = student_tok.encode(TEXT)  # " phil" (index 5) is two teacher tokens
    broken = next(i for i, p in enumerate(vocab.pieces) if p is None)  # part of a character: unreadable alone
    prefix = list(vocab.student_prefix)
    rows = [target_row(prefix, student_tok.eot, words, n) for n in (0, 4, 6, 10)]
    rows.append(target_row(prefix, student_tok.eot, [*words[:3], broken, *words[3:6]], 6))
    tokens, labels = (torch.from_numpy(a) for a in pad_rows(rows, student_tok.eot))
    t_tokens, t_labels, ok = vocab.rows(tokens, labels)
    n_t = len(vocab.teacher_prefix)
    assert (t_tokens[:, :n_t] == torch.tensor(vocab.teacher_prefix)).all()
    # the whole transcript row: the teacher's own tokens of the text, one longer for the split " phil"
    assert t_tokens[3, n_t: n_t + len(words) + 1].tolist() == [t for i in words for t in vocab.pieces[i]]
    assert ok[:4].all()
    # every label kept, in the student's order; each sits where the teacher has read the same text
    kept = labels != IGNORE
    assert t_labels[t_labels != IGNORE].tolist() == labels[kept & ok].tolist()
    row = t_labels[3]
    at = torch.nonzero(row != IGNORE).flatten().tolist()
    assert at[:6] == list(range(n_t - 1, n_t + 5))  # up to " trail": one teacher token per student token
    assert at[6:] == list(range(n_t + 6, n_t + len(words) + 1))  # after " ph" "il": one later
    # the unreadable token: the row is distilled up to it, not from it
    body = ok[4, len(prefix):]
    assert body[:3].all() and not body[3:].any()
    assert int((kept & ~ok).sum()) > 0


def test_the_distribution_comes_back_renormalized(vocab, student_tok):
    logits = torch.randn(3, 51865, generator=torch.Generator().manual_seed(0)) * 3
    out = vocab.to_student(logits, temperature=2.0)
    assert out.shape == (3, N_VOCAB)
    missing = vocab.to_teacher < 0
    assert torch.isinf(out[:, missing]).all() and torch.isfinite(out[:, ~missing]).all()
    assert torch.allclose(torch.logsumexp(out, dim=-1), torch.zeros(3), atol=1e-5)
    (a,), (b,) = student_tok.encode(" the"), student_tok.encode(" sun")  # both shared
    ta, tb = int(vocab.to_teacher[a]), int(vocab.to_teacher[b])
    assert ta >= 0 and tb >= 0
    assert torch.allclose(out[:, a] - out[:, b], (logits[:, ta] - logits[:, tb]) / 2.0, atol=1e-4)


def test_kl_ignores_what_the_teacher_cannot_say():
    g = torch.Generator().manual_seed(1)
    s, t = (torch.log_softmax(torch.randn(4, 50, generator=g), -1) for _ in range(2))
    full = F.kl_div(s, t, log_target=True, reduction="batchmean")
    assert torch.isclose(kl_teacher_student(t, s), full, atol=1e-6)
    assert float(kl_teacher_student(t, t)) == pytest.approx(0.0, abs=1e-6)
    holes = torch.log_softmax(torch.randn(4, 50, generator=g).masked_fill(torch.arange(50) % 3 == 0, float("-inf")), -1)
    kl = kl_teacher_student(holes, s)
    assert torch.isfinite(kl) and kl > 0


@pytest.fixture(scope="module")
def batch(realspeech, student_tok):
    """test_distill's batch: the recording and its transcript, and its first half with the first four tokens."""
    wav = sorted((realspeech / "cmu_arctic" / "wav").iterdir())[0]
    audio, rate = sf.read(wav, dtype="float32")
    assert rate == 16_000
    return distill_batch(audio, student_tok)


def test_base_hears_the_words_it_teaches(batch, teacher, vocab, student_tok):
    """Wrong ids or a shift by one would leave the teacher guessing: on the right rows base, hearing the whole
    recording, names the next word of the transcript at most positions."""
    from training.causal.objective import full_context_logits

    word = (batch.labels != IGNORE) & (batch.labels != student_tok.eot)
    t_tokens, t_labels, ok = vocab.rows(batch.tokens, torch.where(word, batch.labels, IGNORE))
    assert ok[word].all()
    logits = full_context_logits(teacher[0], batch.mel, t_tokens, t_labels, batch.row_utt, batch.utt_frames)
    guess = vocab.to_student(logits, 1.0).argmax(-1)
    assert float((guess == batch.labels[word]).float().mean()) > 0.6  # 0.75 here; shifted by one, 0.04


def test_the_base_teacher_trains_the_adapter(batch, teacher, vocab, student_tok):
    model = load_model("tiny.en")
    apply_lora(model, LoraSettings(r=4), seed=0)
    loss_fn = SamplePointLoss(model, DistillSettings(weight=1.0, temperature=1.0, teacher="base"),
                              eot=student_tok.eot, teacher=(teacher[0], vocab))
    assert not any(n.startswith("_teacher") for n, _ in loss_fn.named_parameters())  # not the adapter's state
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    kls = []
    for _ in range(4):
        loss, n = loss_fn.loss(batch)
        assert list(loss_fn.last) == ["ce", "kd_share", "kd"] and loss_fn.last["kd_share"] == 1.0
        opt.zero_grad()
        loss.backward()
        opt.step()
        kls.append(loss_fn.last["kd"])
    assert all(np.isfinite(kls)) and kls[-1] < kls[0]
    assert all(p.grad is None for p in teacher[0].parameters())


def test_the_teacher_is_in_the_config_hash():
    recipe = FinetuneConfig(datasets=("x",))
    assert recipe.distill.teacher is None  # the recipe: the student's own weights teach
    assert FinetuneConfig(datasets=("x",), distill=DistillSettings(teacher="base")).config_hash() != \
        recipe.config_hash()
