"""Synthetic speech corpus from Debian espeak-ng, with the synthesizer's own word timings.

``write_synthetic_corpus(out_dir, n)`` writes a corpus folder that ``data.corpus.read_folder``
accepts::

    out_dir/transcripts.tsv              utt_id<TAB>text
    out_dir/speakers.tsv                 utt_id<TAB>voice (the espeak voice+variant is the speaker)
    out_dir/wav/<utt_id>.wav             16 kHz mono PCM16 (espeak's 22050 Hz resampled with soxr)
    out_dir/word_alignments_espeak.tsv   utt_id<TAB>word<TAB>start_s<TAB>end_s (one line per
                                         transcript word, normalized as data.text.transcript_words)
    out_dir/synth.json                   parameters, espeak version, file digests; written last

Timings come from libespeak-ng itself (ctypes, no headers needed): espeak is run in
AUDIO_OUTPUT_SYNCHRONOUS mode with phoneme events enabled, and the callback receives the audio
together with WORD / PHONEME / END events that carry the exact sample position (at 22050 Hz)
where the synthesizer started that word or phoneme.

Timing rule (measured on espeak-ng 1.51, see ``word_spans``):

* every phoneme event opens an interval that closes at the next event of any kind (phoneme,
  pause, word, sentence end) with a later sample position;
* a word starts at its WORD event when that event comes after the start of a sounding
  phoneme of the previous word (espeak then emits it where it begins the new word: the
  closure before a stop, the short inter-word gap, the onset of a word-initial vowel), and
  otherwise at its first sounding phoneme (first word, words after a pause, and the WORD
  events espeak emits early, at the start of the previous word's last phoneme);
* a word ends where its last sounding phoneme ends (so, without a pause, exactly where the
  next word starts); pause phonemes (names starting with ``_``) belong to no word, so
  pauses and the leading and trailing silence lie between spans;
* espeak folds some function words into their neighbour ("in the", "of the", "for a") and
  emits one WORD event for the pair, and its text positions are sometimes off ("For a while"
  reports "while" at the position of "For"). WORD events are therefore mapped to transcript
  words monotonically, and a group of transcript words that shares events has its phonemes
  split by the phoneme counts espeak gives each word alone (``espeak_TextToPhonemes``),
  the linking phonemes ";" and "r-" counted with the phoneme before them; scaled when the
  counts still disagree, and by characters only if the group has fewer phonemes than words.

Determinism: espeak-ng keeps wave-generator state between calls inside a process, so the
same text synthesized twice in one process gives different samples (and lengths differing by
a few ms); neither srand() nor re-initializing resets it (espeak_Terminate + espeak_Initialize
hangs in synchronous mode). Each utterance is therefore synthesized in a process forked from a "zygote" worker
that has initialized espeak but never spoken: every utterance starts from the same state and
its audio depends only on (text, voice, rate, pitch). Same (n, texts, seed) → byte-identical
wav and tsv files, whatever the number of worker processes.

Leading/trailing silence: espeak's own (a few ms before the first phoneme, a sentence pause
at the end with espeakENDPAUSE) plus a seeded pad before (50–250 ms) and after (0–150 ms);
a seeded white-noise floor (-70…-60 dBFS RMS) lies under the whole file, so no stretch is
digital silence. Timings are absolute positions in the written file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import json
import logging
import os
import pickle
import random
import re
import shutil
import struct
import subprocess
import sys
import time
import wave
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from data.text import normalize_word, transcript_words

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
SAMPLE_RATE = 16_000
ALIGNMENT_FILE = "word_alignments_espeak.tsv"
ALIGNMENT_HEADER = "utt_id\tword\tstart_s\tend_s"
MANIFEST_FILE = "synth.json"

# espeak voice (language file) + variant; every one checked to exist when the worker starts.
# "en" is British English (gmw/en); "en-us" American; "en-gb-x-rp" Received Pronunciation.
VOICES: tuple[str, ...] = (
    "en-us",
    "en-us+m3",
    "en-us+f2",
    "en-us+f4",
    "en-us+klatt",
    "en+m1",
    "en+f3",
    "en-gb-x-rp+m7",
)
RATE_WPM = (140, 190)
PITCH = (40, 60)  # espeakPITCH, 0..100 (50 = the voice's own)
LEAD_PAD_S = (0.05, 0.25)
TRAIL_PAD_S = (0.0, 0.15)
# A seeded white-noise floor under the whole file (espeak's pauses and the pads are otherwise
# digital zeros, which no recording has and which broke the pocketsphinx aligner on about half
# of the utterances: log-energy of an all-zero frame).
NOISE_DBFS = (-70.0, -60.0)

_LIB_NAMES = ("libespeak-ng.so.1", "libespeak-ng.so")

# speak_lib.h (API revision 12); layout checked against the header: 40 bytes on LP64,
# type@0 unique_identifier@4 text_position@8 length@12 audio_position@16 sample@20
# user_data@24 id@32.
_EV_LIST_TERMINATED, _EV_WORD, _EV_SENTENCE, _EV_MARK, _EV_PLAY, _EV_END, _EV_MSG_TERMINATED, _EV_PHONEME = range(8)
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_PHONEME_EVENTS = 0x0001
_CHARS_AUTO = 0
_ENDPAUSE = 0x1000
_POS_CHARACTER = 1
_PARAM_RATE = 1
_PARAM_PITCH = 3


class SynthesisError(RuntimeError):
    """espeak-ng could not synthesize an utterance, or its output could not be aligned to the text."""


BUILTIN_TEXTS: tuple[str, ...] = (
    "The kettle started to whistle just as the phone rang in the hall.",
    "Please leave your muddy boots by the back door.",
    "We walked along the river until the sun went down.",
    "My sister bought three yellow cups at the market on Saturday.",
    "Could you pass me the salt and the pepper, please?",
    "The bus was late again, so I walked to work.",
    "He keeps his old letters in a box under the bed.",
    "Twenty one people came to the meeting last night.",
    "The children laughed at the puppy chasing its own tail.",
    "I forgot my umbrella, and of course it started raining.",
    "She planted tomatoes, beans and a few rows of carrots.",
    "The library closes at six on weekdays and at noon on Sundays.",
    "Turn left at the bakery and you will see the post office.",
    "Our neighbours painted their fence a bright shade of blue.",
    "The soup needs a little more pepper and a pinch of salt.",
    "He fixed the squeaky hinge with a drop of oil.",
    "Every morning she drinks a glass of water before breakfast.",
    "The train to the coast leaves in about forty minutes.",
    "I think the cat is hiding somewhere in the garden.",
    "They moved into a small flat near the centre of town.",
    "Would you like tea or coffee with your cake?",
    "The museum was full of students on a school trip.",
    "We need two loaves of bread and a dozen eggs.",
    "My grandfather still rides his bicycle to the village shop.",
    "The wind blew the papers off the table and across the room.",
    "She wrote the phone number on the back of her hand.",
    "After dinner we played cards until nearly midnight.",
    "The printer has run out of paper again.",
    "A small boat drifted slowly towards the harbour.",
    "I have been learning to play the piano for two years.",
    "The shop on the corner sells fresh flowers every day.",
    "Don't forget to water the plants while I'm away.",
    "He ran for the bus but missed it by a few seconds.",
    "The room smelled of fresh paint and warm bread.",
    "Fifteen students passed the exam with top marks.",
    "We sat on the porch and watched the storm roll in.",
    "Can you tell me where the nearest pharmacy is?",
    "Her brother works as a nurse at the city hospital.",
    "The lamp in the hallway flickers when the heating comes on.",
    "It took us three hours to drive through the mountains.",
    "The baby finally fell asleep after a long walk in the park.",
    "I usually read the news on my phone during breakfast.",
    "The old bridge was closed for repairs all summer.",
    "They served rice, grilled fish and a green salad.",
    "Please remember to lock the door when you leave.",
    "The farmer sold apples and honey at the side of the road.",
    "A loud knock at the door woke everyone in the house.",
    "He spent the whole afternoon cleaning out the garage.",
    "Our team won the match by two goals to one.",
    "The clock in the kitchen is about five minutes fast.",
    "She keeps a spare key under the flower pot.",
    "The river was so clear that we could see the fish.",
    "I'll meet you outside the cinema at half past seven.",
    "The doctor told him to rest and drink plenty of water.",
    "We painted the kitchen walls a soft shade of green.",
    "The dog barked at the postman every single morning.",
    "Most of the guests had left by the time we arrived.",
    "He cut the cake into eight equal slices.",
    "The road was icy, so we drove very slowly.",
    "They are planning a picnic by the lake next weekend.",
    "My mother makes the best apple pie in the whole family.",
    "The shelves were full of jars of jam and pickles.",
    "It was the coldest winter anyone in the village could remember.",
    "Put the milk back in the fridge when you have finished.",
    "The teacher wrote the date in the corner of the board.",
    "She found an old photograph tucked inside the book.",
    "We could hear the sea from the window of our room.",
    "Nine of the ten lights in the car park were broken.",
    "Wash your hands before you sit down to eat.",
    "The painter climbed a tall ladder to reach the roof.",
    "I like to go for a swim early in the morning.",
    "The hotel gave us a room with a view of the hills.",
    "Somebody left a bag of groceries on the bus.",
    "The wooden floor creaked with every step we took.",
    "He checked the map twice and still took the wrong turn.",
    "On Fridays the market is busy from dawn until dusk.",
    "Her voice was calm, but her hands were shaking.",
    "Thirty seven boxes arrived at the warehouse this morning.",
    "The candle burned down while we talked late into the night.",
    "Let's take the long way home through the woods.",
    "The waiter brought us water and a basket of warm rolls.",
    "My phone battery always dies at the worst possible moment.",
    "The geese flew south in a long, noisy line.",
    "Please write your name at the top of each page.",
    "The cake was burnt on the outside and raw in the middle.",
    "They spent the holiday visiting friends all over the country.",
    "I lost one glove on the way to the station.",
    "The garden gate needs a new lock before the winter.",
    "He whistled a cheerful tune as he walked down the street.",
    "Our flight was delayed by almost two hours.",
    "The little girl counted the stars out loud.",
    "We keep the spare blankets in the cupboard upstairs.",
    "Fresh snow covered the fields and the roofs of the houses.",
    "The cook chopped onions while the sauce simmered on the stove.",
    "It is much quieter here than in the middle of the city.",
    "She always carries a notebook and a pencil in her coat.",
    "The students listened quietly as the old man told his story.",
    "Add the flour slowly and keep stirring the mixture.",
    "We found a lovely little cafe at the end of the lane.",
    "The heavy rain flooded the streets near the station.",
    "He borrowed my ladder and never gave it back.",
    "Four hundred people ran the race through the park.",
    "The kids built a huge sandcastle on the beach.",
    "Is there anything good on television tonight?",
    "The apples in the bowl were starting to go soft.",
    "I heard a strange noise coming from the attic.",
    "Our new neighbour plays the violin every evening.",
    "The parcel should arrive some time on Thursday.",
    "The frost made pretty patterns on the window glass.",
    "Everyone stood up and clapped at the end of the show.",
    "The queue at the bank stretched out onto the pavement.",
    "He tied the boat to the post and stepped onto the dock.",
    "She poured the tea and handed me the biggest cup.",
    "We should leave early to avoid the traffic on the motorway.",
    "The owl sat on the fence and stared at us for a while.",
    "Eleven ducks swam across the pond in a neat row.",
    "I still remember the name of my first teacher.",
    "Close the window, the wind is blowing the rain inside.",
    "Good morning, everyone, and welcome back.",
    "Where did you put the keys?",
    "When the rain finally stopped, we packed a lunch and climbed the hill behind the farm to watch the sunset.",
    "If you see my brother at the station, tell him the train from the north is running twenty minutes late.",
)


# ---------------------------------------------------------------------------------------------
# Reading alignments back


def read_word_alignments(path: str | Path) -> dict[str, list[tuple[str, int, int]]]:
    """``utt_id<TAB>word<TAB>start_s<TAB>end_s`` lines → {utt_id: [(word, start_ms, end_ms), …]}.

    Reads word_alignments_espeak.tsv as well as the real-speech word_alignments_pocketsphinx.tsv
    (an optional ``utt_id word start_s end_s`` header line is skipped). Words keep file order.
    """
    out: dict[str, list[tuple[str, int, int]]] = {}
    path = Path(path)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if n == 1 and fields[:1] == ["utt_id"]:
            continue
        if len(fields) != 4:
            raise ValueError(f"{path}:{n}: expected 4 tab-separated fields, got {line!r}")
        utt_id, word, start_s, end_s = fields
        try:
            start_ms, end_ms = int(round(float(start_s) * 1000)), int(round(float(end_s) * 1000))
        except ValueError:
            raise ValueError(f"{path}:{n}: bad time in {line!r}") from None
        out.setdefault(utt_id, []).append((word, start_ms, end_ms))
    return out


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


def _load_library() -> ctypes.CDLL:
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
        lib = _load_library()
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
        while events[i].type != _EV_LIST_TERMINATED:
            ev = events[i]
            name = bytes(ev.id.string).split(b"\0", 1)[0].decode("utf-8", "replace") if ev.type == _EV_PHONEME else ""
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
            if item and not item.startswith("_") and item not in _LINKING:
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


class _Worker:
    def __init__(self, voices: Sequence[str]) -> None:
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        self.proc = subprocess.Popen([sys.executable, "-c", "from data.synth import _serve; _serve()"],
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


# ---------------------------------------------------------------------------------------------
# From espeak events to word spans (pure functions)


@dataclass(frozen=True, slots=True)
class _Word:
    norm: str
    text: str  # display text, glued punctuation included
    start: int  # character span in the synthesized text
    end: int


def text_words(text: str) -> list[_Word]:
    """transcript_words with character spans: same grouping (punctuation-only tokens glue to a word)."""
    words: list[_Word] = []
    pending_start: int | None = None
    for m in re.finditer(r"\S+", text):
        norm = normalize_word(m.group())
        if norm:
            start = m.start() if pending_start is None else pending_start
            words.append(_Word(norm, text[start:m.end()], start, m.end()))
            pending_start = None
        elif words:
            prev = words[-1]
            words[-1] = _Word(prev.norm, text[prev.start:m.end()], prev.start, m.end())
        elif pending_start is None:
            pending_start = m.start()
    expected = [w.norm for w in transcript_words(text)]
    if [w.norm for w in words] != expected:  # pragma: no cover - guards against drift from data.text
        raise AssertionError(f"word split disagrees with data.text.transcript_words for {text!r}")
    return words


def _is_pause(name: str) -> bool:
    return name.startswith("_")


# Linking phonemes espeak inserts between words that it never gives a word spoken alone:
# ";" (a glide after "the" before a vowel) and "r-" (linking r, "for a"). For splitting a
# merged group they count as part of the phoneme before them.
_LINKING = frozenset({";", "r-"})


def word_spans(text: str, events: Sequence[tuple[int, int, int, str]], n_samples: int,
               counts: Sequence[int]) -> list[tuple[str, int, int]]:
    """One (norm, start_sample, end_sample) per transcript word of ``text``, in order.

    ``events`` are (type, sample, text_position, phoneme name) in the order espeak emitted them;
    ``counts`` the isolated phoneme count of each transcript word. See the module docstring for
    the rule. What it rests on (measured over the built-in texts × all voices): a phoneme
    event's sample is where that phoneme's audio starts (silence right before it at stop bursts
    and after pauses); a WORD event either coincides with its first phoneme, or comes after the
    previous word's last phoneme, where the new word's audio (a stop closure, a short gap, the
    onset of a vowel) begins, or coincides with the *start* of the previous word's last phoneme
    (then it is no boundary). With this rule the only gaps between spans are espeak's pauses.
    """
    words = text_words(text)
    if not words:
        raise SynthesisError(f"no words in {text!r}")
    if len(counts) != len(words):
        raise ValueError("one phoneme count per transcript word")

    # 1. phoneme intervals: each closes at the next event with a later sample position
    phonemes: list[tuple[int, int, str, int]] = []  # (start, end, name, word-event index)
    word_event_pos: list[int] = []  # text position (0-based) of each WORD event
    word_event_start: list[int | None] = []  # where the word starts if the WORD event marks it
    current = -1
    last_phoneme: tuple[int, str] | None = None
    for k, (etype, sample, text_pos, name) in enumerate(events):
        if etype == _EV_PHONEME:
            last_phoneme = (sample, name)
        if etype == _EV_WORD:
            word_event_pos.append(text_pos - 1)
            follows_sound = last_phoneme is not None and not _is_pause(last_phoneme[1]) and sample > last_phoneme[0]
            word_event_start.append(sample if follows_sound else None)
            current = len(word_event_pos) - 1
        elif etype == _EV_PHONEME and current >= 0:
            end = n_samples
            for later in events[k + 1:]:
                if later[1] > sample and later[0] in (_EV_WORD, _EV_PHONEME, _EV_END, _EV_SENTENCE, _EV_MSG_TERMINATED):
                    end = later[1]
                    break
            phonemes.append((sample, min(end, n_samples), name, current))
    if not word_event_pos:
        raise SynthesisError(f"espeak reported no word events for {text!r}")

    # 2. WORD events → transcript words, monotonically (espeak's text positions can lag)
    def word_at(pos: int) -> int:
        for i, w in enumerate(words):
            if pos < w.end:
                return i
        return len(words) - 1

    event_word: list[int] = []
    for pos in word_event_pos:
        event_word.append(max(word_at(pos), event_word[-1] if event_word else 0))

    # 3. groups: a word with events, plus the following words that got none
    first_of_group = sorted(set(event_word))
    if first_of_group[0] != 0:
        first_of_group[0] = 0
    group_of_word = []
    g = -1
    for i in range(len(words)):
        if g + 1 < len(first_of_group) and first_of_group[g + 1] == i:
            g += 1
        group_of_word.append(g)
    group_of_event = [group_of_word[w] for w in event_word]
    group_start: list[int | None] = [None] * len(first_of_group)
    for ev in range(len(event_word) - 1, -1, -1):  # the group's first WORD event decides
        group_start[group_of_event[ev]] = word_event_start[ev]
    group_phonemes: list[list[tuple[int, int]]] = [[] for _ in first_of_group]
    for start, end, name, ev in phonemes:
        if _is_pause(name):
            continue
        ph = group_phonemes[group_of_event[ev]]
        if name in _LINKING and ph:
            ph[-1] = (ph[-1][0], max(ph[-1][1], end))
        elif end > start:
            ph.append((start, end))

    # a group espeak gave no sound (its WORD event carried no phoneme) joins the group before it
    # (the first group: the one after it)
    if not any(group_phonemes):
        raise SynthesisError(f"espeak produced no phonemes for {text!r}")
    keep = [g for g, ph in enumerate(group_phonemes) if ph]
    if keep[0] != 0:
        group_phonemes[0], group_start[0] = group_phonemes[keep[0]], group_start[0]
        keep[0] = 0
    first_of_group = [first_of_group[g] for g in keep]
    group_phonemes = [group_phonemes[g] for g in keep]
    group_start = [group_start[g] for g in keep]

    # 4. split each group's phonemes between its words
    spans: list[tuple[str, int, int]] = []
    for g, first in enumerate(first_of_group):
        last = first_of_group[g + 1] if g + 1 < len(first_of_group) else len(words)
        members = list(range(first, last))
        ph = group_phonemes[g]
        if group_start[g] is not None and group_start[g] < ph[0][0]:
            ph = [(group_start[g], ph[0][1]), *ph[1:]]
        if len(members) == 1:
            spans.append((words[first].norm, ph[0][0], ph[-1][1]))
            continue
        if len(ph) >= len(members):
            weights = [max(1, counts[i]) for i in members]
            cuts = _split_counts(len(ph), weights)
            k = 0
            for i, take in zip(members, cuts, strict=True):
                spans.append((words[i].norm, ph[k][0], ph[k + take - 1][1]))
                k += take
        else:  # fewer phonemes than words: split the time span by characters
            start, end = ph[0][0], ph[-1][1]
            weights = [len(words[i].norm) for i in members]
            total = sum(weights)
            acc = 0
            for i, w in zip(members, weights, strict=True):
                a = start + (end - start) * acc // total
                acc += w
                b = start + (end - start) * acc // total
                spans.append((words[i].norm, a, max(b, a + 1)))
    return spans


def _split_counts(n: int, weights: Sequence[int]) -> list[int]:
    """Split n items into len(weights) contiguous runs (each ≥ 1) proportional to weights."""
    m = len(weights)
    if sum(weights) == n:
        return list(weights)
    total = sum(weights)
    bounds = [0]
    acc = 0
    for j, w in enumerate(weights[:-1], start=1):
        acc += w
        b = round(n * acc / total)
        b = max(b, bounds[-1] + 1)  # at least one item per run
        b = min(b, n - (m - j))  # leave one for every later run
        bounds.append(b)
    bounds.append(n)
    return [bounds[j + 1] - bounds[j] for j in range(m)]


# ---------------------------------------------------------------------------------------------
# Corpus writer


@dataclass(frozen=True, slots=True)
class _Plan:
    utt_id: str
    text: str
    voice: str
    rate: int
    pitch: int
    lead_pad_s: float
    trail_pad_s: float
    noise_dbfs: float


def _clean_text(text: str) -> str:
    return " ".join(str(text).split())


def plan_utterances(n: int, texts: Sequence[str] | None = None, seed: int = 0) -> list[_Plan]:
    """What utterance i says, with which voice/rate/pitch/pads; independent of n (a prefix is stable).

    Ids: ``espeak-s<seed>-<i>`` (built-in texts) or ``espeak-<texts digest>-s<seed>-<i>``.
    Utterance i speaks text i mod len(texts) (the built-in list is shuffled by the seed; given
    texts keep their order). Each text gets a seeded starting voice and moves to the next voice
    on every cycle, so repeated texts are spoken by different voices (up to len(VOICES) cycles).
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if texts is None:
        pool = list(BUILTIN_TEXTS)
        random.Random(f"whisperline-synth:{seed}:order").shuffle(pool)
    else:
        pool = [_clean_text(t) for t in texts]
        if not pool and n:
            raise ValueError("texts is empty")
        for t in pool:
            if not transcript_words(t):
                raise ValueError(f"text has no words: {t!r}")
    # ids stay unique when corpora of different text lists are read together
    prefix = "espeak" if texts is None else f"espeak-{_texts_digest(texts)[:8]}"
    plans = []
    for i in range(n):
        t, cycle = i % len(pool), i // len(pool)
        offset = random.Random(f"whisperline-synth:{seed}:voice:{t}").randrange(len(VOICES))
        rng = random.Random(f"whisperline-synth:{seed}:utt:{i}")
        plans.append(_Plan(
            utt_id=f"{prefix}-s{seed}-{i:05d}",
            text=pool[t],
            voice=VOICES[(offset + cycle) % len(VOICES)],
            rate=rng.randint(*RATE_WPM),
            pitch=rng.randint(*PITCH),
            lead_pad_s=round(rng.uniform(*LEAD_PAD_S), 3),
            trail_pad_s=round(rng.uniform(*TRAIL_PAD_S), 3),
            noise_dbfs=round(rng.uniform(*NOISE_DBFS), 1),
        ))
    return plans


def _texts_digest(texts: Sequence[str] | None) -> str:
    body = json.dumps(list(BUILTIN_TEXTS) if texts is None else [_clean_text(t) for t in texts], ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def _params(n: int, texts: Sequence[str] | None, seed: int, espeak_version: str) -> dict:
    import soxr

    return {
        "format": FORMAT_VERSION,
        "n": n,
        "seed": seed,
        "texts": "builtin" if texts is None else "given",
        "texts_sha256": _texts_digest(texts),
        "voices": list(VOICES),
        "rate_wpm": list(RATE_WPM),
        "pitch": list(PITCH),
        "lead_pad_s": list(LEAD_PAD_S),
        "trail_pad_s": list(TRAIL_PAD_S),
        "noise_dbfs": list(NOISE_DBFS),
        "sample_rate": SAMPLE_RATE,
        "espeak_version": espeak_version,
        "soxr_version": getattr(soxr, "__version__", "?"),
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _complete(folder: Path, params: dict | None = None) -> dict | None:
    """The folder's synth.json if it describes a complete corpus (matching ``params`` if given)."""
    try:
        meta = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("generator") != "whisperline data.synth":
        return None
    if params is not None and meta.get("params") != params:
        return None
    for name in ("transcripts.tsv", "speakers.tsv", ALIGNMENT_FILE):
        if not (folder / name).is_file():
            return None
    wavs = folder / "wav"
    if not wavs.is_dir() or len(list(wavs.glob("*.wav"))) != meta.get("params", {}).get("n"):
        return None
    return meta


def _espeak_version() -> str:
    """The library version without starting a worker (for the idempotency check)."""
    lib = _load_library()
    lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    lib.espeak_Info.restype = ctypes.c_char_p
    return (lib.espeak_Info(None) or b"?").decode()


def _render(plan: _Plan, answer: dict, espeak_rate: int) -> tuple[bytes, list[tuple[str, float, float]], float]:
    """Resample to 16 kHz PCM16, pad, and turn event samples into seconds in the written file."""
    import numpy as np
    import soxr

    raw = np.frombuffer(answer["audio"], dtype=np.int16)
    if raw.size == 0:
        raise SynthesisError(f"{plan.utt_id}: espeak produced no audio for {plan.text!r}")
    spans = word_spans(plan.text, answer["events"], int(raw.size), answer["counts"])
    lead = int(round(plan.lead_pad_s * espeak_rate))
    trail = int(round(plan.trail_pad_s * espeak_rate))
    padded = np.concatenate([np.zeros(lead, np.float32), raw.astype(np.float32) / 32768.0, np.zeros(trail, np.float32)])
    audio = soxr.resample(padded, espeak_rate, SAMPLE_RATE, quality="HQ")
    noise_seed = int.from_bytes(hashlib.sha256(f"whisperline-synth-noise:{plan.utt_id}".encode()).digest()[:8], "little")
    noise = np.random.Generator(np.random.PCG64(noise_seed)).standard_normal(len(audio))
    audio = audio + (10.0 ** (plan.noise_dbfs / 20.0)) * noise
    pcm = np.clip(np.round(audio * 32768.0), -32768, 32767).astype("<i2")
    duration = len(pcm) / SAMPLE_RATE
    timed = []
    for norm, a, b in spans:
        start_s = (lead + a) / espeak_rate
        end_s = min((lead + b) / espeak_rate, duration)
        timed.append((norm, start_s, end_s))
    return pcm.tobytes(), timed, duration


def _write_wav(path: Path, pcm: bytes) -> None:
    with wave.open(str(path), "wb") as fh:
        fh.setnchannels(1)
        fh.setsampwidth(2)
        fh.setframerate(SAMPLE_RATE)
        fh.writeframes(pcm)


def _clean_stale_partials(parent: Path, name: str) -> None:
    for tmp in parent.glob(f".{name}.partial-*"):
        pid_text = tmp.name.rsplit("-", 1)[-1]
        if not pid_text.isdigit():
            continue
        try:
            os.kill(int(pid_text), 0)
            continue  # its writer is still running
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
        except PermissionError:
            continue


def write_synthetic_corpus(out_dir: str | Path, n: int, texts: list[str] | None = None, seed: int = 0,
                           progress: bool = True, workers: int | None = None) -> Path:
    """Synthesize ``n`` utterances into ``out_dir`` (see the module docstring); returns the folder.

    Idempotent: a complete corpus with the same parameters (synth.json) is returned as is.
    The corpus is built in a hidden sibling folder and renamed into place at the end, so an
    interrupted run never leaves something that looks complete. A different corpus written by
    this function is replaced; any other non-empty folder is refused (FileExistsError).
    """
    out = Path(out_dir).expanduser().resolve()
    if n < 1:
        raise ValueError("n must be >= 1")
    params = _params(n, texts, seed, _espeak_version())
    if _complete(out, params) is not None:
        log.info("synthetic corpus %s is already complete", out)
        return out
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST_FILE).exists():
        raise FileExistsError(f"{out} exists and is not a corpus written by data.synth; refusing to overwrite it")
    out.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale_partials(out.parent, out.name)
    plans = plan_utterances(n, texts, seed)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "wav").mkdir(parents=True)
    try:
        stats = _synthesize_all(plans, tmp, progress, workers)
        meta = {"generator": "whisperline data.synth", "params": params, **stats,
                "timing_rule": ("word = [its WORD event if that follows the previous word's last sounding phoneme, "
                                "else its first sounding phoneme; end of its last sounding phoneme]; a phoneme ends "
                                "at the next espeak event (phoneme, pause, word, end) with a later sample; pauses "
                                "belong to no word; words espeak merges are split by their isolated phoneme counts"),
                "files": {name: _sha256(tmp / name) for name in ("transcripts.tsv", "speakers.tsv", ALIGNMENT_FILE)}}
        (tmp / MANIFEST_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if out.exists():
            if (out / MANIFEST_FILE).exists() or not any(out.iterdir()):
                shutil.rmtree(out)
        try:
            os.rename(tmp, out)
        except OSError:
            if _complete(out, params) is not None:  # a concurrent writer finished first
                shutil.rmtree(tmp, ignore_errors=True)
                return out
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _synthesize_all(plans: Sequence[_Plan], folder: Path, progress: bool, workers: int | None) -> dict:
    n_workers = max(1, min(workers or min(2, os.cpu_count() or 1), len(plans)))
    pool: list[_Worker] = []
    transcripts, speakers, alignments = [], [], [ALIGNMENT_HEADER]
    total_audio = 0.0
    started = time.perf_counter()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(plans), desc="espeak-ng", unit="utt")
    try:
        for _ in range(n_workers):
            pool.append(_Worker(VOICES))
        info = pool[0].info
        espeak_rate = int(info["sample_rate"])
        pending: deque[tuple[_Plan, _Worker]] = deque()

        def finish() -> None:
            nonlocal total_audio
            plan, worker = pending.popleft()
            answer = worker.recv()
            if not answer.get("ok"):
                raise SynthesisError(f"{plan.utt_id} ({plan.voice}, {plan.rate} wpm): {answer.get('error')} "
                                     f"— text {plan.text!r}")
            try:
                pcm, timed, duration = _render(plan, answer, espeak_rate)
            except SynthesisError as err:
                raise SynthesisError(f"{plan.utt_id} ({plan.voice}): {err}") from None
            _write_wav(folder / "wav" / f"{plan.utt_id}.wav", pcm)
            transcripts.append(f"{plan.utt_id}\t{plan.text}")
            speakers.append(f"{plan.utt_id}\t{plan.voice}")
            alignments.extend(f"{plan.utt_id}\t{w}\t{a:.3f}\t{b:.3f}" for w, a, b in timed)
            total_audio += duration
            if bar is not None:
                bar.update(1)

        for i, plan in enumerate(plans):
            worker = pool[i % n_workers]
            worker.send({"text": plan.text, "voice": plan.voice, "rate": plan.rate, "pitch": plan.pitch,
                         "words": [w.text for w in text_words(plan.text)]})
            pending.append((plan, worker))
            if len(pending) >= n_workers:
                finish()
        while pending:
            finish()
    finally:
        if bar is not None:
            bar.close()
        for worker in pool:
            worker.close()
    elapsed = time.perf_counter() - started
    log.info("synthesized %d utterances, %.1f s of audio in %.1f s (%.0fx real time)",
             len(plans), total_audio, elapsed, total_audio / max(elapsed, 1e-9))
    for name, lines in (("transcripts.tsv", transcripts), ("speakers.tsv", speakers), (ALIGNMENT_FILE, alignments)):
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"espeak": {"version": info["version"], "data_path": info["data_path"], "sample_rate": espeak_rate},
            "utterances": len(plans), "audio_seconds": round(total_audio, 3),
            "speakers": sorted({p.voice for p in plans})}
