"""espeak-ng through ctypes, run in a worker process (what ``data.synth`` synthesizes with).

Timings come from libespeak-ng itself (ctypes, no headers needed): espeak is run in
AUDIO_OUTPUT_SYNCHRONOUS mode with phoneme events enabled, and the callback receives the audio
together with WORD / PHONEME / END events that carry the exact sample position (at 22050 Hz)
where the synthesizer started that word or phoneme.

Determinism: espeak-ng keeps wave-generator state between calls inside a process, so the
same text synthesized twice in one process gives different samples (and lengths differing by
a few ms); neither srand() nor re-initializing resets it (espeak_Terminate + espeak_Initialize
hangs in synchronous mode). Each utterance is therefore synthesized in a process forked from a "zygote" worker
that has initialized espeak but never spoken: every utterance starts from the same state and
its audio depends only on (text, voice, rate, pitch). Same (n, texts, seed) → byte-identical
wav and tsv files, whatever the number of worker processes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import pickle
import re
import struct
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

_LIB_NAMES = ("libespeak-ng.so.1", "libespeak-ng.so")

# speak_lib.h (API revision 12); layout checked against the header: 40 bytes on LP64,
# type@0 unique_identifier@4 text_position@8 length@12 audio_position@16 sample@20
# user_data@24 id@32.
EV_LIST_TERMINATED, EV_WORD, EV_SENTENCE, EV_MARK, EV_PLAY, EV_END, EV_MSG_TERMINATED, EV_PHONEME = range(8)
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_PHONEME_EVENTS = 0x0001
_CHARS_AUTO = 0
_ENDPAUSE = 0x1000
_POS_CHARACTER = 1
_PARAM_RATE = 1
_PARAM_PITCH = 3


class SynthesisError(RuntimeError):
    """espeak-ng could not synthesize an utterance, or its output could not be aligned to the text."""


# Linking phonemes espeak inserts between words that it never gives a word spoken alone:
# ";" (a glide after "the" before a vowel) and "r-" (linking r, "for a"). For splitting a
# merged group they count as part of the phoneme before them.
LINKING = frozenset({";", "r-"})


# ---------------------------------------------------------------------------------------------
# espeak-ng through ctypes (runs inside the worker process)


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", _EventId),
    ]


if ctypes.sizeof(ctypes.c_void_p) == 8 and ctypes.sizeof(_Event) != 40:  # pragma: no cover
    raise ImportError("unexpected espeak_EVENT layout")

_SynthCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.POINTER(_Event))


def load_library() -> ctypes.CDLL:
    candidates = list(_LIB_NAMES)
    found = ctypes.util.find_library("espeak-ng")
    if found:
        candidates.append(found)
    errors = []
    for name in candidates:
        try:
            return ctypes.CDLL(name)
        except OSError as err:
            errors.append(str(err))
    raise SynthesisError("libespeak-ng not found (Debian/Ubuntu: apt-get install libespeak-ng1 espeak-ng-data): "
                         + "; ".join(errors))


class _Espeak:
    """One initialized libespeak-ng. The library is process-global: one instance per process."""

    def __init__(self) -> None:
        lib = load_library()
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_SynthCallback]
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
                                     ctypes.c_uint, ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int]
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
        lib.espeak_Info.restype = ctypes.c_char_p
        self.lib = lib
        rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, None, _INITIALIZE_PHONEME_EVENTS)
        if rate <= 0:
            raise SynthesisError(f"espeak_Initialize failed ({rate}): is espeak-ng-data installed?")
        self.sample_rate = rate
        data_path = ctypes.c_char_p()
        self.version = (lib.espeak_Info(ctypes.byref(data_path)) or b"?").decode()
        self.data_path = (data_path.value or b"").decode()
        self._chunks: list[bytes] = []
        self._events: list[tuple[int, int, int, str]] = []
        self._callback = _SynthCallback(self._on_audio)  # keep a reference: C holds the pointer
        lib.espeak_SetSynthCallback(self._callback)

    def _on_audio(self, wav, n_samples, events) -> int:  # noqa: ANN001 (ctypes pointers)
        if wav and n_samples > 0:
            self._chunks.append(ctypes.string_at(wav, 2 * n_samples))
        i = 0
        while events[i].type != EV_LIST_TERMINATED:
            ev = events[i]
            name = bytes(ev.id.string).split(b"\0", 1)[0].decode("utf-8", "replace") if ev.type == EV_PHONEME else ""
            self._events.append((ev.type, ev.sample, ev.text_position, name))
            i += 1
        return 0  # 0: go on synthesizing

    def check_voice(self, voice: str) -> None:
        language, _, variant = voice.partition("+")
        if variant and not (Path(self.data_path) / "voices" / "!v" / variant).is_file():
            raise SynthesisError(f"espeak voice variant {variant!r} (in {voice!r}) not found under {self.data_path}/voices/!v")
        if self.lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise SynthesisError(f"espeak voice {voice!r} not found (list: espeak-ng --voices=en)")

    def synthesize(self, text: str, voice: str, rate: int, pitch: int) -> tuple[bytes, list[tuple[int, int, int, str]]]:
        self.check_voice(voice)
        for param, value in ((_PARAM_RATE, rate), (_PARAM_PITCH, pitch)):
            if self.lib.espeak_SetParameter(param, int(value), 0) != 0:
                raise SynthesisError(f"espeak_SetParameter({param}, {value}) failed")
        self._chunks, self._events = [], []
        data = text.encode("utf-8")
        buf = ctypes.create_string_buffer(data)
        status = self.lib.espeak_Synth(buf, len(data) + 1, 0, _POS_CHARACTER, 0, _CHARS_AUTO | _ENDPAUSE, None, None)
        if status != 0:
            raise SynthesisError(f"espeak_Synth returned {status} for {text!r} ({voice})")
        return b"".join(self._chunks), self._events

    def phoneme_count(self, word: str) -> int:
        """How many sounding phonemes espeak gives ``word`` spoken alone (stress marks and pauses dropped)."""
        data = ctypes.c_char_p(word.encode("utf-8"))
        pieces: list[str] = []
        while data.value:
            out = self.lib.espeak_TextToPhonemes(ctypes.byref(data), _CHARS_AUTO, ord("|") << 8)
            if out:
                pieces.append(out.decode("utf-8", "replace"))
        count = 0
        for item in re.split(r"[|\s]+", " ".join(pieces)):
            item = item.strip("',%=")
            if item and not item.startswith("_") and item not in LINKING:
                count += 1
        return count


# ---------------------------------------------------------------------------------------------
# Worker process: a zygote that forks one child per utterance (see the module docstring)


def _send(stream, obj: object) -> None:  # noqa: ANN001
    blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(blob)))
    stream.write(blob)
    stream.flush()


def _recv(stream) -> object:  # noqa: ANN001
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError
    (size,) = struct.unpack("<Q", head)
    blob = stream.read(size)
    if len(blob) < size:
        raise EOFError
    return pickle.loads(blob)


def _synthesize_request(engine: _Espeak, request: dict) -> dict:
    audio, events = engine.synthesize(request["text"], request["voice"], request["rate"], request["pitch"])
    counts = [engine.phoneme_count(word) for word in request["words"]]
    return {"audio": audio, "events": events, "counts": counts}


def _serve() -> None:
    """Worker main loop: requests on stdin, answers on (the original) stdout."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything the C library prints goes to stderr, never into the protocol
    inp = sys.stdin.buffer
    try:
        engine = _Espeak()
        for voice in _recv(inp):
            engine.check_voice(voice)
        _send(out, {"ok": True, "version": engine.version, "data_path": engine.data_path,
                    "sample_rate": engine.sample_rate})
    except Exception as err:  # noqa: BLE001 (reported to the parent)
        _send(out, {"ok": False, "error": f"{type(err).__name__}: {err}"})
        return
    while True:
        try:
            request = _recv(inp)
        except EOFError:
            return
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: fresh espeak state, one utterance, then exit without cleanup
            os.close(read_fd)
            with os.fdopen(write_fd, "wb") as pipe:
                try:
                    answer = {"ok": True, **_synthesize_request(engine, request)}
                except BaseException as err:  # noqa: BLE001
                    answer = {"ok": False, "error": f"{type(err).__name__}: {err}"}
                try:
                    _send(pipe, answer)
                except BaseException:  # noqa: BLE001
                    os._exit(3)
            os._exit(0)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            try:
                answer = _recv(pipe)
            except EOFError:
                answer = None
        _, status = os.waitpid(pid, 0)
        if answer is None:
            answer = {"ok": False, "error": f"synthesis process died (wait status {status})"}
        _send(out, answer)


class Worker:
    def __init__(self, voices: Sequence[str]) -> None:
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        self.proc = subprocess.Popen([sys.executable, "-c", "from data.espeak import _serve; _serve()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=root)
        _send(self.proc.stdin, list(voices))
        self.info = self.recv()
        if not self.info.get("ok"):
            self.close()
            raise SynthesisError(f"espeak-ng worker failed to start: {self.info.get('error')}")

    def send(self, request: dict) -> None:
        _send(self.proc.stdin, request)

    def recv(self) -> dict:
        try:
            return _recv(self.proc.stdout)  # type: ignore[return-value]
        except EOFError:
            code = self.proc.wait()
            raise SynthesisError(f"espeak-ng worker exited unexpectedly (exit code {code})") from None

    def close(self) -> None:
        # Closing both pipes ends the worker: EOF on its input, or a broken pipe if it was still
        # answering a request nobody will read (after an error).
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def espeak_version() -> str:
    """The library version without starting a worker (for the idempotency check)."""
    lib = load_library()
    lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    lib.espeak_Info.restype = ctypes.c_char_p
    return (lib.espeak_Info(None) or b"?").decode()
