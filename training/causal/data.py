"""Training data of causal fine-tuning: utterances from dataset versions (WebDataset shards), per-rank batches,
and the collation of a batch of utterances into one sample-point batch.

Every rank reads the same manifest-listed samples and takes its own slice of a seeded per-epoch permutation, with
the same number of batches on every rank (DDP needs one all-reduce per step on every rank; shard-level splitting
would give ranks unequal counts on small datasets). Reading goes through webdataset in secure mode; a version dir
may be a local path or an ``s3://…`` URL (data/fs.py: dataset.json, the manifest and the shards are read from it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from data.utterances import DatasetError, TrainUtterance
from training.causal.samples import Row, draw_sample_points, pad_rows, target_row, tokens_done, valid_boundaries
from streaming.frontend import causal_log_mel
from streaming.mask import FRAME_MS

SAMPLE_RATE = 16_000
MAX_SAMPLES = 30 * SAMPLE_RATE  # Whisper's context


def rank_batches(n_items: int, world: int, rank: int, batch_size: int, seed: int, epoch: int) -> list[list[int]]:
    """This rank's batches of one epoch: a seeded permutation dealt round-robin, cut to whole batches so that
    every rank has the same number (at least one: small datasets repeat items)."""
    if n_items == 0:
        raise DatasetError("no training utterances")
    order = np.random.default_rng([seed, epoch]).permutation(n_items)
    per_rank = max(batch_size, (n_items // world) // batch_size * batch_size)
    reps = -(-per_rank * world // n_items)
    order = np.tile(order, reps)
    mine = order[rank::world][:per_rank]
    return [mine[i : i + batch_size].tolist() for i in range(0, per_rank, batch_size)]


def padded_mel(audio: np.ndarray, speech_end_ms: int, margin_ms: int, n_mels: int) -> torch.Tensor:
    """Causal log-mel [n_mels, T] (T even) of the audio padded with silence to cover speech end + margin + one
    frame of look-ahead, at most 30 s."""
    need = (speech_end_ms + margin_ms + 2 * FRAME_MS) * SAMPLE_RATE // 1000
    n = min(MAX_SAMPLES, max(len(audio), need))
    x = np.zeros(n, dtype=np.float32)
    x[: min(len(audio), n)] = audio[:n]
    mel = causal_log_mel(x, n_mels, pad_end=True)
    if mel.shape[-1] % 2:
        mel = mel[:, :-1]
    return mel[:, : 2 * (MAX_SAMPLES // 320)]


@dataclass
class SamplePointBatch:
    mel: torch.Tensor  # [U, n_mels, T] (zero beyond each utterance's own length)
    tokens: torch.Tensor  # [R, L] decoder inputs
    labels: torch.Tensor  # [R, L], IGNORE where not supervised
    row_utt: torch.Tensor  # [R] utterance index of each row
    row_frames: torch.Tensor  # [R] encoder frames the row's decoder may attend to (its boundary)
    chunk_ms: int
    tau0_ms: int
    utt_frames: torch.Tensor | None = None  # [U] encoder frames of each utterance's own audio (the teacher's)

    @property
    def n_points(self) -> int:
        return int(self.row_utt.numel())

    @property
    def n_targets(self) -> int:
        return int((self.labels != -100).sum())

    def to(self, device: torch.device | str) -> SamplePointBatch:
        return SamplePointBatch(self.mel.to(device), self.tokens.to(device), self.labels.to(device),
                                self.row_utt.to(device), self.row_frames.to(device), self.chunk_ms, self.tau0_ms,
                                None if self.utt_frames is None else self.utt_frames.to(device))


def collate(utterances: Sequence[TrainUtterance], mels: Sequence[torch.Tensor], *, chunk_ms: int, tau0_ms: int,
            fraction: float, margin_ms: int, prefix: Sequence[int], eot: int,
            rng: np.random.Generator) -> SamplePointBatch:
    """Draw sample points per utterance and build one batch: every utterance encoded once, all its points decoded
    together (one optimizer step for the batch)."""
    rows: list[Row] = []
    row_utt, row_frames = [], []
    for u, (utt, mel) in enumerate(zip(utterances, mels, strict=True)):
        bounds = valid_boundaries(mel.shape[-1] // 2, utt.speech_end_ms, chunk_ms, tau0_ms, margin_ms)
        for e in draw_sample_points(bounds, fraction, rng):
            rows.append(target_row(prefix, eot, utt.token_ids, tokens_done(utt.token_end_ms, e * FRAME_MS)))
            row_utt.append(u)
            row_frames.append(e)
    if not rows:
        raise DatasetError("no sample points in this batch (utterances shorter than tau0?)")
    inputs, labels = pad_rows(rows, eot)
    length = max(m.shape[-1] for m in mels)
    mel = torch.zeros((len(mels), mels[0].shape[0], length), dtype=torch.float32)
    for i, m in enumerate(mels):
        mel[i, :, : m.shape[-1]] = m
    return SamplePointBatch(mel, torch.from_numpy(inputs), torch.from_numpy(labels), torch.tensor(row_utt),
                            torch.tensor(row_frames), chunk_ms, tau0_ms,
                            utt_frames=torch.tensor([m.shape[-1] // 2 for m in mels]))
