"""EMMA's alignment maths against the verified fixtures of ../shared/research/emma.md §7 and a direct recurrence."""

from __future__ import annotations

import pytest
import torch

from configs.emma import EmmaConfig, PChooseSettings
from training.emma.alignment import (
    alignment_closed_form,
    alignment_log_scan,
    alignment_variance,
    differentiable_average_lagging,
    expected_delays,
    expected_soft_attention,
    log_alignment_from_logits,
    preserve_mass,
)
from training.emma.objective import EmmaLoss, make_batch
from training.emma.p_choose import EmmaPolicy

P = torch.tensor([[0.5, 0.5, 0.5], [0.2, 0.6, 0.9]], dtype=torch.float64)
ALPHA = torch.tensor([[0.5, 0.25, 0.125], [0.1, 0.39, 0.3465]], dtype=torch.float64)


def recurrence(p: torch.Tensor) -> torch.Tensor:
    """alpha_ij = p_ij · sum_{k≤j} alpha_{i-1,k} · prod_{l=k}^{j-1} (1 - p_il), alpha_0 = one-hot: loops only."""
    t, s = p.shape
    prev = [1.0] + [0.0] * (s - 1)
    out = torch.zeros(t, s, dtype=torch.float64)
    for i in range(t):
        for j in range(s):
            total = 0.0
            for k in range(j + 1):
                stay = 1.0
                for m in range(k, j):
                    stay *= 1 - float(p[i, m])
                total += prev[k] * stay
            out[i, j] = float(p[i, j]) * total
        prev = out[i].tolist()
    return out


def test_alpha_fixture_closed_form_and_log_scan():
    assert torch.allclose(alignment_closed_form(P), ALPHA, atol=1e-12)
    assert torch.allclose(alignment_log_scan(torch.logit(P)), ALPHA, atol=1e-12)
    assert torch.allclose(recurrence(P), ALPHA, atol=1e-12)


def test_both_forms_match_the_recurrence_on_random_inputs():
    g = torch.Generator().manual_seed(0)
    p = torch.rand(5, 9, generator=g, dtype=torch.float64)
    ref = recurrence(p)
    assert torch.allclose(alignment_closed_form(p), ref, atol=1e-12)
    assert torch.allclose(alignment_log_scan(torch.logit(p)), ref, atol=1e-12)


def test_padding_mask_equals_the_shorter_input():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(2, 3, 4, 10, generator=g, dtype=torch.float64)
    lengths = torch.tensor([[10] * 3, [6] * 3])
    alpha = log_alignment_from_logits(z, lengths).exp()
    short = log_alignment_from_logits(z[1:, :, :, :6]).exp()
    assert torch.allclose(alpha[1, :, :, :6], short[0], atol=1e-12)
    assert float(alpha[1, :, :, 6:].abs().max()) == 0.0


def test_rows_sum_at_most_one_and_mass_preservation_fills_them():
    z = torch.randn(3, 6, 40, dtype=torch.float64)
    alpha = alignment_log_scan(z)
    assert float(alpha.sum(-1).max()) <= 1 + 1e-12
    lengths = torch.full((3,), 40)
    kept = preserve_mass(alpha, lengths)
    assert torch.allclose(kept.sum(-1), torch.ones(3, 6, dtype=torch.float64), atol=1e-12)


def test_delay_and_variance_fixture():
    assert torch.allclose(expected_delays(ALPHA), torch.tensor([1.375, 1.9195], dtype=torch.float64), atol=1e-9)
    assert torch.allclose(alignment_variance(ALPHA), torch.tensor([0.734375, 1.09402], dtype=torch.float64),
                          atol=1e-5)


@pytest.mark.parametrize("energy, expected", [([0.0, 0.0, 0.0], [0.666667, 0.166667, 0.041667]),
                                              ([0.0, 1.0, 2.0], [0.578489, 0.213356, 0.083155])])
def test_beta_fixture(energy, expected):
    alpha = ALPHA[:1]
    beta = expected_soft_attention(alpha.log(), torch.tensor([energy], dtype=torch.float64))
    assert torch.allclose(beta[0], torch.tensor(expected, dtype=torch.float64), atol=1e-6)
    assert float(beta.sum()) == pytest.approx(float(alpha.sum()), abs=1e-12)  # sum beta = sum alpha
    assert float(beta.min()) >= 0


def test_float32_stable_for_1500_frames_and_saturated_logits():
    g = torch.Generator().manual_seed(2)
    z = (torch.randn(2, 6, 8, 1500, generator=g) * 30).requires_grad_(True)  # p rounds to 0 or 1 in float32
    alpha = alignment_log_scan(z)
    assert alpha.dtype == torch.float32 and torch.isfinite(alpha).all()
    assert float(alpha.detach().sum(-1).max()) <= 1 + 1e-5
    delays = expected_delays(preserve_mass(alpha, torch.full((2, 6), 1500)))
    delays.sum().backward()
    assert torch.isfinite(z.grad).all() and float(z.grad.abs().sum()) > 0
    beta = expected_soft_attention(alpha.double().clamp_min(1e-300).log(), torch.randn(2, 6, 8, 1500) * 50)
    assert torch.isfinite(beta).all()


def test_dal_matches_the_simuleval_worked_example():
    delays = torch.tensor([[1200.0, 1200, 2500, 3400, 5000, 5000]], dtype=torch.float64)
    dal = differentiable_average_lagging(delays, torch.tensor([5000.0]), torch.ones(1, 6))
    assert float(dal) == pytest.approx(1355.56, abs=0.01)


class _Dims:
    n_text_state, n_text_head, n_text_layer = 16, 2, 2


def _tiny_decoder():
    from whisper.model import TextDecoder

    torch.manual_seed(0)
    decoder = TextDecoder(n_vocab=60, n_ctx=16, n_state=16, n_head=2, n_layer=2)
    with torch.no_grad():  # whisper allocates it with torch.empty (real weights overwrite it): make it defined
        decoder.positional_embedding.normal_(0, 0.02)
    return decoder


@pytest.mark.parametrize("alignment", ["log_scan", "closed_form"])
def test_gradients_reach_p_choose_and_beta_changes_the_nll(alignment):
    decoder = _tiny_decoder()
    policy = EmmaPolicy(16, 2, 2, PChooseSettings(energy_bias=0.5))  # early writes: beta differs from softmax
    cfg = EmmaConfig(datasets=("unused",), encoder="original", alignment=alignment, lambda_latency=1.0,
                     lambda_variance=0.1)
    g = torch.Generator().manual_seed(3)
    frames = [torch.randn(12, 16, generator=g), torch.randn(7, 16, generator=g)]
    batch = make_batch(frames, [[5, 6, 7], [8, 9]], prefix=[1, 2], eot=3)
    loss, parts = EmmaLoss(decoder, policy, cfg)(batch, beta_weight=0.5)
    loss.backward()
    grads = [p.grad for p in policy.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert sum(float(g.abs().sum()) for g in grads) > 0
    _, plain = EmmaLoss(decoder, policy, cfg)(batch, beta_weight=0.0)
    assert parts["nll"] != pytest.approx(plain["nll"], rel=1e-6)  # beta modulation is really applied
    assert 0 < parts["latency_s"] <= 12 * 0.02 + 1e-9  # delays inside the utterance (mass preserved)


def test_closed_form_and_log_scan_give_the_same_loss():
    decoder = _tiny_decoder()
    policy = EmmaPolicy(16, 2, 2)
    g = torch.Generator().manual_seed(4)
    frames = [torch.randn(9, 16, generator=g), torch.randn(5, 16, generator=g)]
    batch = make_batch(frames, [[5, 6, 7], [8]], prefix=[1, 2], eot=3)
    losses = [EmmaLoss(decoder, policy, EmmaConfig(datasets=("u",), encoder="original", alignment=a,
                                                   latency_loss="dal"))(batch, 0.3)[1] for a in ("log_scan", "closed_form")]
    assert losses[0]["loss"] == pytest.approx(losses[1]["loss"], rel=1e-5)


def test_alignment_supervision_targets_follow_the_token_ends():
    decoder = _tiny_decoder()
    policy = EmmaPolicy(16, 2, 2)
    g = torch.Generator().manual_seed(5)
    frames = [torch.randn(10, 16, generator=g), torch.randn(6, 16, generator=g)]
    batch = make_batch(frames, [[5, 6], [8]], prefix=[1, 2], eot=3, token_end_ms=[[40, 130], [90]])
    # ends in frames (ceil of ms / 20); the EOT target ends with the last token; padding never ends
    assert batch.end_frames.tolist() == [[2, 7, 7], [5, 5, 10**6]]
    cfg = EmmaConfig(datasets=("u",), encoder="original", lambda_alignment=1.0)
    loss, parts = EmmaLoss(decoder, policy, cfg)(batch, 0.0)
    assert parts["alignment_bce"] > 0
    loss.backward()
    assert float(policy.layers[0].q_energy[0].weight.grad.abs().sum()) > 0
    with pytest.raises(ValueError, match="token end times"):
        EmmaLoss(decoder, policy, cfg)(make_batch(frames, [[5, 6], [8]], prefix=[1, 2], eot=3), 0.0)


def test_configs_reject_bad_values_before_any_work():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="adapter_dir"):
        EmmaConfig(datasets=("u",))  # causal_lora encoder without an adapter
    with pytest.raises(ValidationError, match="multiple of 20"):
        EmmaConfig(datasets=("u",), encoder="original", chunk_ms=250)
    with pytest.raises(ValidationError):
        EmmaConfig(datasets=("u",), encoder="original", lambda_latency=-0.1)
    with pytest.raises(ValidationError):
        EmmaConfig(datasets=("u",), encoder="original", t_emma=1.5)
    cfg = EmmaConfig(datasets=("u",), encoder="original")
    assert cfg.config_hash() == cfg.model_copy(update={"t_emma": 0.9, "max_stall": 7, "decision": "mean"}).config_hash()
    assert cfg.config_hash() != cfg.model_copy(update={"lambda_latency": 0.2}).config_hash()


def test_sweep_grid_order_pareto_and_promotion_rule():
    from configs.emma import SweepConfig
    from training.emma.dashboard import mark_pareto
    from training.emma.registry import PromotionRefused, pick_best

    base = EmmaConfig(datasets=("u",), encoder="original")
    trials = SweepConfig(base=base, t_emma=(0.2, 0.4), lambda_latency=(0.01, 0.05), lambda_variance=(0.0,)
                         ).trial_configs()
    assert [(c.t_emma, c.lambda_latency) for c in trials] == [(0.2, 0.01), (0.2, 0.05), (0.4, 0.01), (0.4, 0.05)]
    assert trials[0].config_hash() == trials[2].config_hash() != trials[1].config_hash()  # thresholds share
    rows = [{"al_ms": 900, "wer": 0.10}, {"al_ms": 1200, "wer": 0.07}, {"al_ms": 1300, "wer": 0.08},
            {"al_ms": 2000, "wer": 0.07}]
    mark_pareto(rows)
    assert [r["pareto"] for r in rows] == [True, True, False, False]
    assert pick_best(rows, al_budget_ms=1000) is rows[0] and pick_best(rows, None) is rows[1]
    with pytest.raises(PromotionRefused):
        pick_best(rows, al_budget_ms=500)
