"""pocketsphinx forced aligner: the embedded default (en-us acoustic model + CMUdict ship in the wheel).

Each utterance is decoded against a linear finite-state grammar of its words. Unlike
``set_align_text`` (no optional pauses: a word then swallows the silence after it), the FSG search
inserts optional ``<sil>``/noise fillers between words, so word ends stop where speech stops.
Batch cepstral mean normalisation is used because the whole utterance is known (live CMN
drifts over the first second). Frames are 10 ms: a word over frames [a, b] spans [10a, 10b + 10) ms.

Words missing from CMUdict get a pronunciation from data.g2p (dictionary compounds, then
espeak-ng) and are added to the decoder's dictionary for the rest of the process.
"""

from __future__ import annotations

import hashlib
import re
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


class PocketsphinxAligner(Aligner):
    name = "pocketsphinx"

    def __init__(self, silprob: float = 0.1, fillprob: float = 1e-8, beam: float = 1e-48) -> None:
        from pocketsphinx import Decoder, get_model_path

        self.model_dir = Path(get_model_path()) / "en-us"
        self.options = {"cmn": "batch", "silprob": float(silprob), "fillprob": float(fillprob), "beam": float(beam)}
        # logfn silences the C library's chatter on stderr (hundreds of lines per utterance).
        self.decoder = Decoder(lm=None, logfn="/dev/null", **self.options)
        self.added: dict[str, str] = {}  # OOV word → how its pronunciation was found

    @cached_property
    def version(self) -> str:
        digest = hashlib.sha256()
        for name in ("cmudict-en-us.dict", "en-us/mdef", "en-us/means"):
            digest.update((self.model_dir / name).read_bytes())
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"pocketsphinx-{package_version('pocketsphinx')}+en-us-{digest.hexdigest()[:10]}|{opts}|dither1|g2p-espeak"

    def _ensure_pronounced(self, words: Sequence[str]) -> None:
        for word in dict.fromkeys(words):
            if self.decoder.lookup_word(word) is not None:
                continue
            try:
                phones, how = pronounce(word, self.decoder.lookup_word)
            except G2PError as err:
                raise AlignmentError("oov_word", f"{word!r}: {err}") from None
            self.decoder.add_word(word, " ".join(phones), True)
            self.added[word] = how

    def align(self, audio: np.ndarray, words: Sequence[str]) -> list[WordSpan]:
        if not words:
            raise AlignmentError("align_failed", "no words to align")
        self._ensure_pronounced(words)
        pcm = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2")
        # Stretches of exact digital zeros (synthetic speech, zero padding) have -inf log energy and
        # derail the search (a word goes missing). ±1 LSB of dither fixes it; a fixed seed keeps
        # alignments reproducible.
        dither = np.random.default_rng(len(pcm)).integers(-1, 2, size=len(pcm), dtype=np.int16)
        pcm = np.clip(pcm.astype(np.int32) + dither, -32768, 32767).astype("<i2")
        fsg = self.decoder.create_fsg("align", 0, len(words), [(i, i + 1, 1.0, w) for i, w in enumerate(words)])
        self.decoder.add_fsg("align", fsg)
        self.decoder.activate_search("align")
        # Feature-extraction state (the cepstral mean among it; set_cmn alone is not enough) carries
        # over between utterances even with batch CMN: an alignment then depended on which utterance
        # the worker process saw before, and two clean builds differed. Reset it every time.
        self.decoder.reinit_feat()
        self.decoder.start_utt()
        self.decoder.process_raw(pcm.tobytes(), full_utt=True)
        self.decoder.end_utt()
        segments = self.decoder.seg() if self.decoder.hyp() is not None else None
        if segments is None:
            # The search never reached the grammar's final state: the words cannot be forced onto
            # this audio (noise, or a transcript of another utterance).
            raise AlignmentError("align_failed", "pocketsphinx found no path through the transcript")
        duration_ms = int(round(len(audio) * 1000 / 16_000))
        spans = [WordSpan(_ALT_PRON.sub("", s.word), s.start_frame * 10, min((s.end_frame + 1) * 10, duration_ms))
                 for s in segments if not s.word.startswith(_FILLERS)]
        if [s.word for s in spans] != list(words):
            raise AlignmentError("word_count_mismatch", f"aligned {[s.word for s in spans][:10]} ≠ {list(words)[:10]}")
        return spans
