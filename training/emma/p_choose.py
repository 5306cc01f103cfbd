"""The stepwise write-probability network of EMMA, one ``PChooseLayer`` per Whisper decoder layer.

p_ij = sigmoid((FFN_s(s_{i-1}) · FFN_h(h_j) / sqrt(d_head) + b) / tau), per head (the attention's head split):
s_{i-1} is the decoder state entering the layer's cross-attention (after its layer norm), h_j an encoder frame.
FFN_s / FFN_h are ``n_energy_layers`` × [Linear(d, d), ReLU] (ReLU after the last layer too, so both are ≥ 0 and
p ≥ sigmoid(b/tau) until b moves); b is one learnable scalar (init -0.5), tau = 0.2 (SeamlessStreaming's
dense_1b values, ../shared/research/emma.md §1.1). No key pooling: a 20 ms Whisper frame is the decision unit, so
the frontier frame seen at inference is exactly a training key (emma.md pitfall 6).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from configs.emma import PChooseSettings


def energy_projection(d: int, n_layers: int, final_relu: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for _ in range(n_layers):
        layers += [nn.Linear(d, d), nn.ReLU()]
    return nn.Sequential(*(layers if final_relu else layers[:-1]))


class PChooseLayer(nn.Module):
    def __init__(self, d: int, n_head: int, settings: PChooseSettings) -> None:
        super().__init__()
        self.n_head = n_head
        self.temperature = settings.temperature
        self.q_energy = energy_projection(d, settings.n_energy_layers, settings.final_relu)
        self.k_energy = energy_projection(d, settings.n_energy_layers, settings.final_relu)
        self.energy_bias = nn.Parameter(torch.full((1,), settings.energy_bias))

    def _heads(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        return x.view(b, n, self.n_head, d // self.n_head).transpose(1, 2)

    def keys(self, audio: Tensor) -> Tensor:
        """FFN_h of encoder frames [B, S, d] → [B, H, S, d_head] (cacheable per frame when streaming)."""
        return self._heads(self.k_energy(audio))

    def logits(self, states: Tensor, keys: Tensor) -> Tensor:
        """Write logits z [B, H, T, S] (p = sigmoid(z)) of decoder states [B, T, d] against projected keys."""
        q = self._heads(self.q_energy(states))
        energy = q @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return (energy + self.energy_bias.to(energy.dtype)) / self.temperature

    def forward(self, states: Tensor, audio: Tensor) -> Tensor:
        return self.logits(states, self.keys(audio))


class EmmaPolicy(nn.Module):
    """One p_choose layer per decoder layer (decisions take the min over all of them and their heads)."""

    def __init__(self, d: int, n_head: int, n_layer: int, settings: PChooseSettings = PChooseSettings()) -> None:
        super().__init__()
        self.settings = settings
        self.layers = nn.ModuleList(PChooseLayer(d, n_head, settings) for _ in range(n_layer))

    @classmethod
    def for_model(cls, model: nn.Module, settings: PChooseSettings = PChooseSettings(), seed: int | None = None
                  ) -> EmmaPolicy:
        dims = model.dims
        if seed is not None:
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                return cls(dims.n_text_state, dims.n_text_head, dims.n_text_layer, settings)
        return cls(dims.n_text_state, dims.n_text_head, dims.n_text_layer, settings)
