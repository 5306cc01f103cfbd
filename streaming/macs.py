"""Analytic multiply-accumulate (MAC) counts of the Whisper encoder: offline, streaming, masked full sequence.

Counted: conv1 (k=3, n_mels → d, one output per mel frame), conv2 (k=3, stride 2, d → d, one output per encoder
frame), per layer the Q/K/V/out projections (4·n·d²), the attention scores Q·Kᵀ (n_q·n_k·d over all heads) and
A·V (n_q·n_k·d), and the MLP (2·n·d·4d = 8·n·d²). Not counted (O(n·d) or O(n·n_k·heads), no multiply-accumulate
of weights): biases, LayerNorm, GELU, softmax, scaling, residual adds. One MAC = 2 FLOPs in
``torch.utils.flop_counter`` terms.

``row_multiple`` / ``key_multiple`` reproduce the padding that :class:`~streaming.encoder.CausalEncoder`
executes (query/matmul rows to a multiple of 4, keys to a multiple of 16, or 512 with ``exact=True``): the default (1, 1) counts
the useful work only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streaming.encoder import FAST_KEY_MULTIPLE, KEY_MULTIPLE, ROW_MULTIPLE
from streaming.mask import block_ends


def _dims(dims: Any) -> tuple[int, int, int]:
    """(n_mels, d, n_layer) from a whisper ``ModelDimensions`` or a mapping with the same field names."""
    get = dims.__getitem__ if isinstance(dims, Mapping) else lambda k: getattr(dims, k)
    return int(get("n_mels")), int(get("n_audio_state")), int(get("n_audio_layer"))


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def conv_macs(dims: Any, n_frames: int, row_multiple: int = 1) -> int:
    """conv1 over 2·n mel frames + conv2 over n encoder frames."""
    n_mels, d, _ = _dims(dims)
    return _round_up(2 * n_frames, row_multiple) * d * n_mels * 3 + _round_up(n_frames, row_multiple) * d * d * 3


def layer_macs(d: int, n_queries: int, n_keys: int) -> int:
    """One transformer layer for ``n_queries`` rows attending to ``n_keys`` keys (projections, scores, A·V, MLP)."""
    return 4 * n_queries * d * d + 2 * n_queries * n_keys * d + 8 * n_queries * d * d


def encoder_macs_offline(dims: Any, n_frames: int = 1500) -> int:
    """A full bidirectional pass over ``n_frames`` encoder frames (Whisper offline: always 1500 = 30 s)."""
    _, d, n_layer = _dims(dims)
    return conv_macs(dims, n_frames) + n_layer * layer_macs(d, n_frames, n_frames)


def encoder_macs_masked_full(dims: Any, n_frames: int, chunk_ms: int | None = None, tau0_ms: int | None = None,
                             skip_masked: bool = False, row_multiple: int = 1, key_multiple: int = 1) -> int:
    """The full-sequence block-masked forward (training): a dense attention kernel computes every score,
    masked or not, so this equals :func:`encoder_macs_offline` of the same length (plus padding, if given).
    ``skip_masked=True`` counts only the allowed (query, key) pairs, which is exactly the streaming count."""
    if skip_masked:
        if chunk_ms is None or tau0_ms is None:
            raise ValueError("skip_masked needs chunk_ms and tau0_ms")
        return encoder_macs_stream(dims, n_frames, chunk_ms, tau0_ms)
    _, d, n_layer = _dims(dims)
    rows, keys = _round_up(n_frames, row_multiple), _round_up(n_frames, key_multiple)
    return conv_macs(dims, n_frames, row_multiple) + n_layer * layer_macs(d, rows, keys)


def encoder_macs_stream(dims: Any, n_frames: int, chunk_ms: int, tau0_ms: int,
                        row_multiple: int = 1, key_multiple: int = 1) -> int:
    """Streaming with a K/V cache: each block runs its own frames through the projections/MLP once and attends to
    all cached frames plus itself (sum over blocks of ``layer_macs(d, block, block_end)``); the conv front computes
    each frame once."""
    _, d, n_layer = _dims(dims)
    total, start = 0, 0
    for end in block_ends(n_frames, chunk_ms, tau0_ms):
        rows, keys = _round_up(end - start, row_multiple), _round_up(end, key_multiple)
        total += layer_macs(d, rows, keys)
        start = end
    return conv_macs(dims, n_frames) + n_layer * total


def executed_padding(exact: bool = False) -> tuple[int, int]:
    """(row multiple, key multiple) that the causal encoder executes (see encoder.py's note on numerics)."""
    return ROW_MULTIPLE, KEY_MULTIPLE if exact else FAST_KEY_MULTIPLE
