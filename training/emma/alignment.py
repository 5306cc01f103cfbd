"""EMMA's expected monotonic alignment, expected soft attention and alignment-shaping losses.

Notation (../shared/research/emma.md §1): target step i, source frame j; p[i, j] = P(write target i at frame j).

- ``alignment_closed_form``: the paper's closed form, alpha_i = p_i ⊙ (alpha_{i-1} @ T(i)) with
  T(i)[m, n] = prod_{l=m}^{n-1} (1 - p_{i,l}) built by roll/triu/cumprod: products of probabilities only, no
  division, no clamp. O(S²) memory per head and target, so it is the reference (tests, short inputs).
- ``alignment_log_scan``: the same recurrence in log space, linear in S: with c_j = sum_{l<j} log(1 - p_l),
  log q_{i,j} = c_j + logcumsumexp_k≤j(log alpha_{i-1,k} - c_k). It works from the write *logits* (log p and
  log(1 - p) are ``logsigmoid(±z)``: finite for every finite logit, where 1 - sigmoid(z) rounds to 0 in float32)
  and runs in float64, so no term under- or overflows. Default for training (the closed form would hold
  L·H·T·S² floats: gigabytes for a 10 s utterance). Tests check both against the recurrence.
- The legacy MMA form (divide by an exclusive cumprod, clamp at eps) is deliberately absent: it is biased
  (emma.md §7.2).

Padding: frames ≥ the utterance's length get p = 0 (masked in p, never an -inf energy: emma.md pitfall 3).
``mass_preservation`` puts the never-written remainder 1 - sum_j alpha_ij on the last real frame (reading to the
end of the input writes there), so the latency losses cannot be gamed by alpha → 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

_NEG = -1e30  # "log 0" that stays finite (logcumsumexp and its gradient are NaN-free with it)


def alignment_closed_form(p: Tensor) -> Tensor:
    """alpha [..., T, S] from p [..., T, S] (alpha_0 = one-hot at the first frame)."""
    s = p.shape[-1]
    # row n of T(i) is built column-wise: roll puts p_{n-1} in column n, triu(1) drops the wrapped column 0 and
    # the diagonal, cumprod over n gives prod_{l=m}^{n-1}(1 - p_l) above the diagonal, triu() keeps 1 on it
    rolled = p.roll(1, dims=-1).unsqueeze(-2).expand(*p.shape[:-1], s, s).triu(1)
    transition = (1 - rolled).cumprod(dim=-1).triu()  # [..., T, S, S]
    rows = [p[..., 0, :] * transition[..., 0, 0, :]]
    for i in range(1, p.shape[-2]):
        rows.append(p[..., i, :] * (rows[-1].unsqueeze(-2) @ transition[..., i, :, :]).squeeze(-2))
    return torch.stack(rows, dim=-2)


def log_alignment_from_logits(logits: Tensor, lengths: Tensor | None = None) -> Tensor:
    """log alpha [..., T, S] (float64) from write logits z [..., T, S] (p = sigmoid(z)); ``lengths`` [...]: real
    frames per row (frames past it can never be chosen)."""
    z = logits.double()
    log_p = torch.nn.functional.logsigmoid(z)
    log_stay = torch.nn.functional.logsigmoid(-z)  # log(1 - p)
    if lengths is not None:
        real = torch.arange(z.shape[-1], device=z.device) < lengths.to(z.device)[..., None, None]
        log_p = log_p.masked_fill(~real, _NEG)
        log_stay = log_stay.masked_fill(~real, 0.0)
    c = torch.cumsum(log_stay, dim=-1) - log_stay  # exclusive: c_j = sum_{l<j} log(1 - p_l)
    prev = torch.full_like(z[..., 0, :], _NEG)
    prev[..., 0] = 0.0  # alpha_0: one-hot at the first frame
    rows = []
    for i in range(z.shape[-2]):
        log_q = c[..., i, :] + torch.logcumsumexp(prev - c[..., i, :], dim=-1)
        prev = log_p[..., i, :] + log_q
        rows.append(prev)
    return torch.stack(rows, dim=-2)


def alignment_log_scan(logits: Tensor, lengths: Tensor | None = None) -> Tensor:
    """alpha [..., T, S] in the logits' dtype (see ``log_alignment_from_logits``)."""
    return log_alignment_from_logits(logits, lengths).exp().to(logits.dtype)


def preserve_mass(alpha: Tensor, lengths: Tensor) -> Tensor:
    """alpha with 1 - sum_j alpha_ij added on each row's last real frame (``lengths`` [...] real frames)."""
    remainder = (1 - alpha.sum(dim=-1)).clamp_min(0)  # >= 0 up to rounding; the clamp only removes -1e-16s
    last = (lengths.to(alpha.device).long() - 1).clamp_min(0)[..., None, None].expand(*alpha.shape[:-1], 1)
    return alpha.scatter_add(-1, last, remainder.unsqueeze(-1))


def expected_soft_attention(log_alpha: Tensor, energy: Tensor, lengths: Tensor | None = None) -> Tensor:
    """EMMA/MILk beta [..., T, S] (infinite lookback) from log alpha and the *soft-attention* energies u.

    beta_ij = sum_{k≥j} alpha_ik · exp(u_ij) / sum_{l≤k} exp(u_il), computed in log space: no division by a
    cumulative sum that can underflow. Invariants: beta ≥ 0 and sum_j beta_ij = sum_j alpha_ij.
    """
    u = energy.double()
    if lengths is not None:
        real = torch.arange(u.shape[-1], device=u.device) < lengths.to(u.device)[..., None, None]
        u = u.masked_fill(~real, _NEG)
    inner = log_alpha.double() - torch.logcumsumexp(u, dim=-1)
    log_beta = u + torch.logcumsumexp(inner.flip(-1), dim=-1).flip(-1)
    return log_beta.exp().to(energy.dtype)


def frame_positions(n_frames: int, frame_s: float, device=None) -> Tensor:
    """Delay of writing at frame j: the end of that frame, (j + 1)·frame_s seconds."""
    return (torch.arange(n_frames, device=device, dtype=torch.float64) + 1) * frame_s


def expected_delays(alpha: Tensor, frame_s: float = 1.0) -> Tensor:
    """d̄_i = sum_j (j + 1)·frame_s · alpha_ij: [..., T] (1-indexed frames when frame_s = 1)."""
    pos = frame_positions(alpha.shape[-1], frame_s, alpha.device).to(alpha.dtype)
    return alpha @ pos


def alignment_variance(alpha: Tensor, frame_s: float = 1.0) -> Tensor:
    """v̄_i = sum_j pos_j² alpha_ij - (sum_j pos_j alpha_ij)²: the within-alignment variance, [..., T]."""
    pos = frame_positions(alpha.shape[-1], frame_s, alpha.device).to(alpha.dtype)
    return alpha @ pos.square() - (alpha @ pos).square()


def differentiable_average_lagging(delays: Tensor, source_s: Tensor, target_mask: Tensor) -> Tensor:
    """DAL over expected delays [B, T] (seconds), one value per row: g'_1 = d_1, g'_i = max(d_i, g'_{i-1} + 1/γ),
    DAL = mean_i (g'_i - (i - 1)/γ) with 1/γ = |X| / |Y| (|Y|: the row's real targets, ``target_mask`` [B, T])."""
    n_targets = target_mask.sum(-1).clamp_min(1).to(delays.dtype)
    step = source_s.to(delays.dtype) / n_targets  # 1/γ, seconds per target
    g = [delays[:, 0]]
    for i in range(1, delays.shape[1]):
        g.append(torch.maximum(delays[:, i], g[-1] + step))
    lagged = torch.stack(g, dim=1) - torch.arange(delays.shape[1], device=delays.device, dtype=delays.dtype) * step[:, None]
    return (lagged * target_mask).sum(-1) / n_targets
