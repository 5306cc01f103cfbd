"""CTranslate2 Whisper variables → an openai-whisper state dict, checked by a strict load (``data.weights``
finds the files, converts and caches; ``data.ct2`` reads the binary)."""

from __future__ import annotations

import base64
import gzip
import re
import numpy as np
import torch
import whisper
from whisper.model import ModelDimensions, Whisper

from data.ct2 import CT2Model, WeightsError


# Scalars CTranslate2 stores as "variables" that describe the architecture rather than hold weights. The values
# openai-whisper's architecture needs: GELU (Activation enum value 3), pre-norm blocks, no ALiBi, embeddings not
# scaled by sqrt(d).
_EXPECTED_FLAGS: dict[str, int] = {
    "decoder/activation": 3,
    "decoder/pre_norm": 1,
    "decoder/alibi": 0,
    "decoder/scale_embeddings": 0,
}
# Whisper's attention heads are 64 wide in every released size (tiny 384/6 ... large 1280/20); used only when a
# file lacks the stored head count.
_WHISPER_HEAD_DIM = 64


class _Vars:
    """The CT2 variables plus bookkeeping of what the mapping consumed (so leftovers can be reported)."""

    def __init__(self, model: CT2Model, label: str) -> None:
        self.v = model.variables
        self.aliases = model.aliases
        self.label = label
        self.used: set[str] = set()

    def has(self, name: str) -> bool:
        return name in self.v or name in self.aliases

    def raw(self, name: str) -> np.ndarray:
        key = self.aliases.get(name, name)
        if key not in self.v:
            raise WeightsError(f"{self.label}: variable '{name}' is missing (not a Whisper CTranslate2 model?)")
        self.used.add(key)
        return self.v[key]

    def weight(self, prefix: str) -> np.ndarray:
        """``<prefix>/weight`` as float, undoing CTranslate2 quantization if the file was converted with it."""
        w = self.raw(f"{prefix}/weight")
        scale_name = f"{prefix}/weight_scale"
        if not self.has(scale_name):
            if w.dtype.kind != "f":
                raise WeightsError(f"{self.label}: '{prefix}/weight' is {w.dtype} without a weight_scale")
            return w
        scale = self.raw(scale_name).astype(np.float32)
        # CTranslate2 quantizes as q = round(w * scale): int8 with one scale per output row (conv weights are
        # flattened to 2D first), int16 with one global scale. Dequantize by dividing.
        out = w.reshape(w.shape[0], -1).astype(np.float32)
        out /= scale.reshape(-1, 1) if scale.ndim else scale
        return out.reshape(w.shape)

    def bias(self, prefix: str) -> np.ndarray:
        return self.raw(f"{prefix}/bias")

    def scalar(self, name: str) -> int | None:
        if name not in self.v:
            return None
        self.used.add(name)
        return int(self.v[name].reshape(-1)[0])


def _n_layers(names: list[str], side: str) -> int:
    idx = {int(m.group(1)) for n in names if (m := re.match(rf"{side}/layer_(\d+)/", n))}
    n = len(idx)
    if idx != set(range(n)):
        raise WeightsError(f"{side} layers are not numbered 0..{n - 1}: {sorted(idx)}")
    return n


def _n_heads(vs: _Vars, side: str, n_state: int) -> int:
    stored = vs.scalar(f"{side}/num_heads")
    n_head = stored if stored is not None else n_state // _WHISPER_HEAD_DIM
    if n_head <= 0 or n_state % n_head:
        raise WeightsError(f"{vs.label}: {side} has {n_head} heads, which does not divide width {n_state}")
    return n_head


def _linear(out: dict[str, np.ndarray], vs: _Vars, ct2: str, ours: str) -> None:
    out[f"{ours}.weight"] = vs.weight(ct2)
    out[f"{ours}.bias"] = vs.bias(ct2)


def _layer_norm(out: dict[str, np.ndarray], vs: _Vars, ct2: str, ours: str) -> None:
    out[f"{ours}.weight"] = vs.raw(f"{ct2}/gamma")
    out[f"{ours}.bias"] = vs.raw(f"{ct2}/beta")


def _split_rows(a: np.ndarray, parts: int, what: str, label: str) -> list[np.ndarray]:
    if a.shape[0] % parts:
        raise WeightsError(f"{label}: fused '{what}' has {a.shape[0]} rows, not divisible into {parts} projections")
    return np.split(a, parts, axis=0)


def _attention(out: dict[str, np.ndarray], vs: _Vars, ct2: str, ours: str, cross: bool) -> None:
    """Map one CTranslate2 attention block.

    Self-attention fuses q,k,v into ``linear_0`` (rows [q; k; v]) and has the output projection in ``linear_1``.
    Cross-attention keeps q in ``linear_0``, fuses [k; v] into ``linear_1`` and has the output in ``linear_2``.
    openai-whisper's key projection has no bias; the converter stores zeros there. We drop that bias slice
    unconditionally: a key bias adds q·b to every score of a query row, which softmax cancels exactly.
    """
    if cross:
        _linear(out, vs, f"{ct2}/linear_0", f"{ours}.query")
        kv_w = _split_rows(vs.weight(f"{ct2}/linear_1"), 2, f"{ct2}/linear_1/weight", vs.label)
        kv_b = _split_rows(vs.bias(f"{ct2}/linear_1"), 2, f"{ct2}/linear_1/bias", vs.label)
        out[f"{ours}.key.weight"] = kv_w[0]
        out[f"{ours}.value.weight"], out[f"{ours}.value.bias"] = kv_w[1], kv_b[1]
        _linear(out, vs, f"{ct2}/linear_2", f"{ours}.out")
    else:
        qkv_w = _split_rows(vs.weight(f"{ct2}/linear_0"), 3, f"{ct2}/linear_0/weight", vs.label)
        qkv_b = _split_rows(vs.bias(f"{ct2}/linear_0"), 3, f"{ct2}/linear_0/bias", vs.label)
        out[f"{ours}.query.weight"], out[f"{ours}.query.bias"] = qkv_w[0], qkv_b[0]
        out[f"{ours}.key.weight"] = qkv_w[1]
        out[f"{ours}.value.weight"], out[f"{ours}.value.bias"] = qkv_w[2], qkv_b[2]
        _linear(out, vs, f"{ct2}/linear_1", f"{ours}.out")


def _block(out: dict[str, np.ndarray], vs: _Vars, ct2: str, ours: str, cross: bool) -> None:
    """One residual block: CT2 keeps each sub-layer's pre-norm inside the sub-layer, whisper names them apart."""
    _attention(out, vs, f"{ct2}/self_attention", f"{ours}.attn", cross=False)
    _layer_norm(out, vs, f"{ct2}/self_attention/layer_norm", f"{ours}.attn_ln")
    if cross:
        _attention(out, vs, f"{ct2}/attention", f"{ours}.cross_attn", cross=True)
        _layer_norm(out, vs, f"{ct2}/attention/layer_norm", f"{ours}.cross_attn_ln")
    _linear(out, vs, f"{ct2}/ffn/linear_0", f"{ours}.mlp.0")  # mlp = Sequential(Linear, GELU, Linear)
    _linear(out, vs, f"{ct2}/ffn/linear_1", f"{ours}.mlp.2")
    _layer_norm(out, vs, f"{ct2}/ffn/layer_norm", f"{ours}.mlp_ln")


def ct2_to_whisper(model: CT2Model, label: str = "model.bin") -> tuple[dict[str, int], dict[str, torch.Tensor]]:
    """Turn a parsed CTranslate2 WhisperSpec into openai-whisper ``(dims, state_dict)`` (float16 tensors).

    Dimensions come from tensor shapes and the stored head counts, never from a table of model names.
    """
    if model.spec_name != "WhisperSpec":
        raise WeightsError(f"{label}: spec '{model.spec_name}' is not a Whisper model (expected 'WhisperSpec')")
    vs = _Vars(model, label)
    for flag, want in _EXPECTED_FLAGS.items():
        got = vs.scalar(flag)
        if got is not None and got != want:
            raise WeightsError(f"{label}: {flag} = {got}, openai-whisper's architecture needs {want}")
    for flag in ("decoder/alignment_heads", "decoder/alignment_layer", "decoder/start_from_zero_embedding"):
        vs.scalar(flag)  # runtime options of CTranslate2's decoder; nothing to map

    names = list(model.variables)
    conv1 = vs.weight("encoder/conv1")  # (n_audio_state, n_mels, 3)
    emb = vs.weight("decoder/embeddings")  # (n_vocab, n_text_state)
    audio_pos = vs.raw("encoder/position_encodings/encodings")  # sinusoids, (n_audio_ctx, n_audio_state)
    text_pos = vs.raw("decoder/position_encodings/encodings")  # learned, (n_text_ctx, n_text_state)
    if conv1.ndim != 3 or emb.ndim != 2 or audio_pos.ndim != 2 or text_pos.ndim != 2:
        raise WeightsError(f"{label}: unexpected tensor ranks for conv1/embeddings/position encodings")
    dims = {
        "n_mels": int(conv1.shape[1]),
        "n_audio_ctx": int(audio_pos.shape[0]),
        "n_audio_state": int(conv1.shape[0]),
        "n_audio_head": _n_heads(vs, "encoder", int(conv1.shape[0])),
        "n_audio_layer": _n_layers(names, "encoder"),
        "n_vocab": int(emb.shape[0]),
        "n_text_ctx": int(text_pos.shape[0]),
        "n_text_state": int(emb.shape[1]),
        "n_text_head": _n_heads(vs, "decoder", int(emb.shape[1])),
        "n_text_layer": _n_layers(names, "decoder"),
    }

    sd: dict[str, np.ndarray] = {}
    _linear(sd, vs, "encoder/conv1", "encoder.conv1")
    _linear(sd, vs, "encoder/conv2", "encoder.conv2")
    # CTranslate2 stores the encoder's fixed sinusoidal table; openai-whisper keeps it as a persistent buffer,
    # so it is part of the state dict (official checkpoints carry it in float16 too).
    sd["encoder.positional_embedding"] = audio_pos
    for i in range(dims["n_audio_layer"]):
        _block(sd, vs, f"encoder/layer_{i}", f"encoder.blocks.{i}", cross=False)
    _layer_norm(sd, vs, "encoder/layer_norm", "encoder.ln_post")

    sd["decoder.token_embedding.weight"] = emb
    sd["decoder.positional_embedding"] = text_pos
    for i in range(dims["n_text_layer"]):
        _block(sd, vs, f"decoder/layer_{i}", f"decoder.blocks.{i}", cross=True)
    _layer_norm(sd, vs, "decoder/layer_norm", "decoder.ln")

    # openai-whisper computes logits with the token embedding (tied weights); CTranslate2 writes the projection
    # as an alias of the embedding. A separate, different projection cannot be represented.
    if vs.has("decoder/projection/weight"):
        proj, emb_raw = vs.raw("decoder/projection/weight"), vs.raw("decoder/embeddings/weight")
        if proj is not emb_raw and not np.array_equal(proj, emb_raw):
            raise WeightsError(f"{label}: decoder/projection/weight differs from the token embedding (untied)")
    if vs.has("decoder/projection/bias"):
        if np.any(vs.raw("decoder/projection/bias")):
            raise WeightsError(f"{label}: decoder/projection/bias is non-zero; openai-whisper has no output bias")

    # Bit rot inside a float16 tensor is invisible to the format; NaN/inf is the one symptom worth checking.
    for key, a in sd.items():
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise WeightsError(f"{label}: '{key}' holds {int((~np.isfinite(a)).sum())} non-finite values (corrupted)")

    leftovers = sorted(n for n, a in model.variables.items() if n not in vs.used and a.ndim > 0)
    if leftovers:
        raise WeightsError(f"{label}: {len(leftovers)} tensors do not fit openai-whisper, e.g. {leftovers[:3]}")

    # Own, contiguous float16 copies: independent of the read buffer, and the same precision as OpenAI's files.
    tensors = {k: torch.from_numpy(np.array(a, dtype=np.float16, order="C", copy=True)) for k, a in sd.items()}
    return dims, tensors


def _alignment_heads(name: str) -> bytes | None:
    return whisper._ALIGNMENT_HEADS.get(name)  # noqa: SLF001 - the only place openai-whisper exposes them


def strict_model(dims: dict[str, int], state_dict: dict[str, torch.Tensor], label: str) -> Whisper:
    """Build a Whisper model and load the weights with strict=True; any mismatch becomes a WeightsError."""
    try:
        model = Whisper(ModelDimensions(**dims))
        model.load_state_dict(state_dict, strict=True)
    except (RuntimeError, TypeError, ValueError) as e:
        raise WeightsError(f"{label}: weights do not load into Whisper{dims}: {e}") from e
    return model


def set_alignment_heads(model: Whisper, name: str | None, label: str) -> None:
    """Set whisper's per-model cross-attention heads used for word timing (DTW).

    ``whisper.load_model`` only does this for official names it downloads; a converted file loaded by path
    would otherwise keep the default (all heads of the upper half of the decoder) and give worse word times.
    """
    heads = _alignment_heads(name) if name else None
    if heads is None:
        return
    try:
        model.set_alignment_heads(heads)
    except RuntimeError as e:  # the bitmask's size is n_text_layer × n_text_head of the named model
        raise WeightsError(f"{label}: alignment heads of '{name}' do not fit this model ({e})") from e


def decode_alignment_heads(dump: bytes, n_layer: int, n_head: int) -> list[tuple[int, int]]:
    """(layer, head) pairs of whisper's base85+gzip bitmask; used to cross-check config.json in tests."""
    mask = np.frombuffer(gzip.decompress(base64.b85decode(dump)), dtype=bool).reshape(n_layer, n_head)
    return [(int(a), int(b)) for a, b in zip(*np.nonzero(mask))]
