"""pocketsphinx forced aligner: the embedded default (en-us acoustic model + CMUdict ship in the wheel).

Each utterance is decoded against a linear finite-state grammar of its words. Unlike
``set_align_text`` (no optional pauses: a word then swallows the silence after it), the FSG search
inserts optional ``<sil>``/noise fillers between words, so word ends stop where speech stops.
Batch cepstral mean normalisation is used because the whole utterance is known (live CMN
drifts over the first second). Frames are 10 ms: a word over frames [a, b] spans [10a, 10b + 10) ms.

Search settings:
- ``bestpath`` off: the lattice pass after an FSG search may end the path before the grammar's
  final state and drop the last word (cmusphinx/pocketsphinx#318); the FSG search's Viterbi path is
  the alignment.
- Wide beams, no HMM cap: a linear grammar keeps few HMMs alive, and default beams drop the right
  path when a word is said a little differently from its dictionary entry.
- Flexible grammar for transcripts with multi-word items: each input word that stands for several
  spoken words ("$1,250" → "one thousand two hundred fifty dollars") may instead be any phone
  sequence (a penalised phone loop beside its words). A speaker who reads a number, date or symbol
  another way then still aligns, the item's span covering whatever was said, and its neighbours keep
  their places. Plain words stay strict, and at most ``MAX_GARBAGE_SHARE`` of the items may be
  replaced, so a transcript of other speech is still rejected. If the flexible search finds no path,
  the strict one is tried.
- Second try: when no path reaches the grammar's final state (a word said far from its dictionary
  phones), the same grammar is searched once more with ``RETRY_BEAM`` (a second decoder, made on first
  need). Its path still has to pass the transcript check.

Transcript check (``transcript_mismatch``, docs/decisions/transcript-check.md): a forced aligner always
finds *some* path, so the forced path's acoustic score is compared with a free phone loop's on the same
audio (pocketsphinx's per-segment scores are relative to the frame's best state, so their logs sum to a
per-utterance cost). Speech that says the transcript costs the forced path about as much as the loop;
speech that says something else costs it more than ``MAX_FIT_GAP`` per frame. The check also rejects
some speech that reads digits or symbols another way than the transcript's verbalisation. Clips under
``MIN_FIT_S`` are too short for a stable score and are not judged.

Words missing from CMUdict get a pronunciation from data.g2p (dictionary compounds, then
espeak-ng) and are added to the decoder's dictionary for the rest of the process.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from importlib.metadata import version as package_version
from pathlib import Path

import numpy as np

from data.aligners.base import Aligner
from data.g2p import G2PError, pronounce
from data.types import AlignmentError, WordSpan

_ALT_PRON = re.compile(r"\(\d+\)$")  # CMUdict alternates: "the(2)"
_FILLERS = ("<", "[", "(NULL)")
# The en-us model's phones; "ph_xx" words (one phone each) make the flexible grammar's phone loop.
# Transcript words never contain "_" (data.verbalize), so these names cannot clash with them.
PHONES = ("AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH UH UW V W Y Z "
          "ZH").split()
_PHONE_WORD = "ph_"
# Flexible grammar: entering an item's phone loop costs GARBAGE_ENTER, each further phone GARBAGE_LOOP
# (shared by all phones), tuned on word boundaries of tests/fixtures/real_transcripts.tsv: a cheaper
# loop replaces words that were said.
GARBAGE_ENTER = 1e-40
GARBAGE_LOOP = 0.02
MAX_GARBAGE_SHARE = 0.5
# Transcript check: mean log score per 10 ms frame by which the forced path may trail a free phone loop.
MAX_FIT_GAP = 1e-3
MIN_FIT_S = 1.5
# Second try's beams (beam and pbeam, wbeam), where the first found no path (docs/decisions/transcript-check.md)
RETRY_BEAM, RETRY_WBEAM = 1e-150, 1e-120


class PocketsphinxAligner(Aligner):
    name = "pocketsphinx"

    def __init__(self, silprob: float = 0.1, fillprob: float = 1e-8, beam: float = 1e-100,
                 wbeam: float = 1e-80) -> None:
        from pocketsphinx import get_model_path  # lazy: the C library and its model load only for an aligner

        self.model_dir = Path(get_model_path()) / "en-us"
        self.options = {"cmn": "batch", "silprob": float(silprob), "fillprob": float(fillprob), "beam": float(beam),
                        "pbeam": float(beam), "wbeam": float(wbeam), "maxhmmpf": -1, "bestpath": False}
        self.added: dict[str, str] = {}  # OOV word → how its pronunciation was found
        self._phones: dict[str, str] = {}  # OOV word → its phones (for the second try's decoder)
        # utterances aligned by the strict / flexible grammar, those with items said otherwise, second tries
        self.passes: Counter[str] = Counter()
        # each search gets its decoder as an argument: the second try's wider beams never become the aligner's state
        self._first = self._new_decoder(self.options)
        self._wide = None  # the second try's decoder (``RETRY_BEAM``), made on first need

    def _new_decoder(self, options: dict):
        from pocketsphinx import Decoder  # lazy: see __init__

        # logfn silences the C library's chatter on stderr (hundreds of lines per utterance).
        decoder = Decoder(lm=None, logfn="/dev/null", **options)
        phone_words = [_PHONE_WORD + phone.lower() for phone in PHONES]
        for word, phone in zip(phone_words, PHONES):
            decoder.add_word(word, phone, True)
        for word, phones in self._phones.items():
            decoder.add_word(word, phones, True)
        # the transcript check's free decode: one or more phones, fillers between
        loop = [(a, 1, 1 / len(PHONES), w) for a in (0, 1) for w in phone_words]
        decoder.add_fsg("phone_loop", decoder.create_fsg("phone_loop", 0, 1, loop))
        return decoder

    @cached_property
    def version(self) -> str:
        digest = hashlib.sha256()
        for name in ("cmudict-en-us.dict", "en-us/mdef", "en-us/means"):
            digest.update((self.model_dir / name).read_bytes())
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return (f"pocketsphinx-{package_version('pocketsphinx')}+en-us-{digest.hexdigest()[:10]}|{opts}|dither1"
                f"|g2p-espeak|flexible-phoneloop{GARBAGE_ENTER:g},{GARBAGE_LOOP:g},{MAX_GARBAGE_SHARE:g}"
                f"|fit{MAX_FIT_GAP:g},{MIN_FIT_S:g}|retry{RETRY_BEAM:g},{RETRY_WBEAM:g}")

    def _ensure_pronounced(self, words: Sequence[str]) -> None:
        for word in dict.fromkeys(words):
            if self._first.lookup_word(word) is not None:
                continue
            try:
                phones, how = pronounce(word, self._first.lookup_word)
            except G2PError as err:
                raise AlignmentError("oov_word", f"{word!r}: {err}") from None
            self._phones[word] = " ".join(phones)
            for decoder in (self._first, self._wide):
                if decoder is not None:
                    decoder.add_word(word, self._phones[word], True)
            self.added[word] = how

    def align_spoken(self, audio: np.ndarray, words: Sequence[str],
                     groups: Sequence[int] | None = None) -> list[WordSpan]:
        if not words:
            raise AlignmentError("align_failed", "no words to align")
        self._ensure_pronounced(words)
        pcm = self._pcm(audio)
        duration_ms = int(round(len(audio) * 1000 / 16_000))
        try:
            found = self._paths(self._first, pcm, words, groups)
        except AlignmentError as err:
            if err.reason != "align_failed":
                raise
            self._wide = self._wide or self._new_decoder(
                {**self.options, "beam": RETRY_BEAM, "pbeam": RETRY_BEAM, "wbeam": RETRY_WBEAM})
            # the second try (module docstring), its transcript check under the same beams
            found = self._paths(self._wide, pcm, words, groups)
            self.passes["wide_beams"] += 1
            self._check_fit(self._wide, pcm)
        else:
            self._check_fit(self._first, pcm)
        return [WordSpan(w, min(a * 10, duration_ms), min((b + 1) * 10, duration_ms)) for w, a, b in found]

    @staticmethod
    def _pcm(audio: np.ndarray) -> np.ndarray:
        pcm = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2")
        # Stretches of exact digital zeros (synthetic speech, zero padding) have -inf log energy and
        # derail the search (a word goes missing). ±1 LSB of dither fixes it; a fixed seed keeps
        # alignments reproducible.
        dither = np.random.default_rng(len(pcm)).integers(-1, 2, size=len(pcm), dtype=np.int16)
        return np.clip(pcm.astype(np.int32) + dither, -32768, 32767).astype("<i2")

    def _paths(self, decoder, pcm: np.ndarray, words: Sequence[str], groups: Sequence[int] | None
               ) -> list[tuple[str, int, int]]:
        """The flexible grammar's path where an item stands for several words, else (or failing that) the strict one."""
        if groups is not None and sum(groups) == len(words) and max(groups) > 1:
            try:
                found = self._flexible(decoder, pcm, words, groups)
                self.passes["flexible"] += 1
                return found
            except AlignmentError:
                pass  # the strict grammar below may still find a path
        found = self._strict(decoder, pcm, words)
        self.passes["strict"] += 1
        return found

    def _check_fit(self, decoder, pcm: np.ndarray) -> None:
        """Reject the transcript when the forced path (just searched) trails a free phone loop by too much."""
        if len(pcm) < MIN_FIT_S * 16_000:
            return  # too short to judge: no second decode
        forced = self._path_score(decoder)
        if not self._decode(decoder, pcm, "phone_loop"):
            return  # no free path either (silence): the forced one stands
        gap = (self._path_score(decoder) - forced) / max(1, len(pcm) // 160)
        if gap > MAX_FIT_GAP:
            raise AlignmentError("transcript_mismatch", f"the transcript's path trails a free phone loop by "
                                 f"{gap:.2e} per frame (at most {MAX_FIT_GAP:g}): the speech says something else")

    @staticmethod
    def _path_score(decoder) -> float:
        """Sum of the log acoustic scores of the current best path's segments (fillers included)."""
        return float(sum(math.log(max(s.ascore, 1e-300)) for s in decoder.seg()))

    def _strict(self, decoder, pcm: np.ndarray, words: Sequence[str]) -> list[tuple[str, int, int]]:
        found = self._search(decoder, pcm, [(i, i + 1, 1.0, w) for i, w in enumerate(words)], len(words))
        if [w for w, _, _ in found] != list(words):
            # pocketsphinx falls back to the best *partial* path when none reaches the final state.
            raise AlignmentError("align_failed", f"no path through the whole transcript: the best partial path "
                                 f"stops after word {len(found)} of {len(words)}")
        return found

    def _search(self, decoder, pcm: np.ndarray, transitions: list[tuple], final: int) -> list[tuple[str, int, int]]:
        """(word, first frame, last frame) of the best path through the grammar, fillers left out."""
        fsg = decoder.create_fsg("align", 0, final, transitions)
        decoder.add_fsg("align", fsg)
        if not self._decode(decoder, pcm, "align"):
            # The search never reached the grammar's final state: the words cannot be forced onto
            # this audio (noise, or a transcript of another utterance).
            raise AlignmentError("align_failed", "pocketsphinx found no path through the transcript")
        return [(_ALT_PRON.sub("", s.word), s.start_frame, s.end_frame) for s in decoder.seg()
                if not s.word.startswith(_FILLERS)]

    @staticmethod
    def _decode(decoder, pcm: np.ndarray, search: str) -> bool:
        """Run one whole-utterance search; whether it reached the grammar's final state."""
        decoder.activate_search(search)
        # Feature-extraction state (the cepstral mean among it; set_cmn alone is not enough) carries over
        # between utterances even with batch CMN: reset it so an alignment does not depend on the one before.
        decoder.reinit_feat()
        decoder.start_utt()
        decoder.process_raw(pcm.tobytes(), full_utt=True)
        decoder.end_utt()
        return decoder.hyp() is not None

    def _flexible(self, decoder, pcm: np.ndarray, words: Sequence[str], groups: Sequence[int]
                  ) -> list[tuple[str, int, int]]:
        """Align with a phone loop as the alternative of every multi-word item; one span per spoken word."""
        transitions: list[tuple] = []
        items: list[list[str]] = []
        state, pos = 0, 0
        n_states = len(words) + 1  # states 0..len(words) follow the words; loop states come after
        for n in groups:
            item = list(words[pos: pos + n])
            items.append(item)
            transitions += [(state + k, state + k + 1, 1.0, w) for k, w in enumerate(item)]
            if n > 1:
                loop = n_states
                n_states += 1
                for phone in PHONES:
                    word = _PHONE_WORD + phone.lower()
                    transitions += [(state, loop, GARBAGE_ENTER / len(PHONES), word),
                                    (loop, loop, GARBAGE_LOOP / len(PHONES), word)]
                transitions.append((loop, state + n, 1.0))  # epsilon: leave the loop after ≥ 1 phone
            state += n
            pos += n
        found = self._search(decoder, pcm, transitions, len(words))
        spans: list[tuple[str, int, int]] = []
        i = k = 0  # item, segment
        replaced = 0
        while i < len(items):
            item = items[i]
            if [w for w, _, _ in found[k: k + len(item)]] == item:
                spans += found[k: k + len(item)]
                i, k = i + 1, k + len(item)
                continue
            run_end = k
            while run_end < len(found) and found[run_end][0].startswith(_PHONE_WORD):
                run_end += 1
            # A phone run covers this item and maybe the next multi-word ones: those before the next
            # item whose words follow the run (or all the rest at the end).
            j = i + 1
            while j < len(items) and not (run_end < len(found)
                                           and [w for w, _, _ in found[run_end: run_end + len(items[j])]] == items[j]):
                j += 1
            covered = items[i:j]
            if run_end == k or any(len(c) < 2 for c in covered) or run_end - k < len(covered):
                raise AlignmentError("align_failed", f"no path through the whole transcript (flexible grammar, "
                                     f"stopped at word {i + 1} of {len(items)})")
            cuts = np.linspace(k, run_end, len(covered) + 1).round().astype(int)
            for c, a, b in zip(covered, cuts, cuts[1:]):
                spans += _split_evenly(c, found[a][1], found[b - 1][2])
            replaced += len(covered)
            i, k = j, run_end
        if k != len(found):
            raise AlignmentError("align_failed", "the flexible grammar's path does not match the transcript")
        if replaced > max(1, int(MAX_GARBAGE_SHARE * len(items))):
            raise AlignmentError("align_failed", f"{replaced} of {len(items)} words were not said as written "
                                 f"(at most {MAX_GARBAGE_SHARE:.0%} may be)")
        if replaced:
            self.passes["said_otherwise"] += 1
        return spans


def _split_evenly(words: Sequence[str], first: int, last: int) -> list[tuple[str, int, int]]:
    """Spans for the spoken words of an item that was said some other way: its frames cut evenly."""
    edges = np.linspace(first, last + 1, len(words) + 1).round().astype(int)
    return [(w, int(a), int(max(a, b - 1))) for w, a, b in zip(words, edges, edges[1:])]
