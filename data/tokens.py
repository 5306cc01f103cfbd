"""Whisper BPE tokens of a transcript and the end time of every token.

Rule (the target of the causal/streaming training): the BPE tokens of one word share the word's
span in proportion to their spoken characters, counted as UTF-8 bytes of the token text that
are not ASCII spaces or punctuation (punctuation is not spoken: "Printing," ends its comma token
at the word end, together with " Printing"). Token k of a word [start, end] ends at
    start + (end - start) * (bytes of tokens 1..k) / (bytes of all the word's tokens),
so the last token ends exactly at the word end. The public CarelessWhisper code splits a word's
span evenly by token *count*, which lets a one-letter suffix token ("s") claim as much time as a
long stem; characters track how much of the word has been spoken much more closely.
A token with no spoken characters (a bare space, a comma) ends where the token before it ended,
or at the word end if it is the word's last token.

Every word is encoded with a leading space, as Whisper emits it mid-sentence and usually at
the start too; concatenating the words' tokens equals encoding " " + transcript, because the
BPE pre-tokenizer never merges across a space.
"""

from __future__ import annotations

from collections.abc import Sequence
import string
from functools import lru_cache

from data.types import WordSpan


@lru_cache(maxsize=2)
def get_tokenizer(family: str):  # -> whisper.tokenizer.Tokenizer
    """Whisper's tokenizer; its vocabulary ships inside the openai-whisper wheel (no download)."""
    from whisper.tokenizer import get_tokenizer as whisper_tokenizer  # lazy: whisper pulls torch

    if family not in ("english", "multilingual"):
        raise ValueError(f"tokenizer family must be 'english' or 'multilingual', not {family!r}")
    multilingual = family == "multilingual"
    return whisper_tokenizer(multilingual, language="en" if multilingual else None, task="transcribe")


def tokenizer_id(family: str) -> str:
    tok = get_tokenizer(family)
    return f"whisper-{tok.encoding.name.removesuffix('.tiktoken')}"


def word_tokens(family: str, words: Sequence[str]) -> list[list[int]]:
    tok = get_tokenizer(family)
    return [tok.encode(" " + w) for w in words]


def token_end_times(token_lists: Sequence[Sequence[int]], spans: Sequence[WordSpan], family: str) -> list[int]:
    """End time (ms) of every token, flattened in order; see the module docstring for the rule."""
    if len(token_lists) != len(spans):
        raise ValueError(f"{len(token_lists)} token lists for {len(spans)} word spans")
    encoding = get_tokenizer(family).encoding
    ends: list[int] = []
    for tokens, span in zip(token_lists, spans):
        widths = [_spoken_bytes(encoding.decode_single_token_bytes(t)) for t in tokens]
        total = sum(widths)
        done = 0
        for i, width in enumerate(widths):
            done += width
            if i == len(widths) - 1:
                ends.append(span.end_ms)  # exact, whatever rounding did before
            elif total == 0:
                ends.append(span.end_ms)
            else:
                ends.append(span.start_ms + round((span.end_ms - span.start_ms) * done / total))
    return ends


_SILENT = frozenset((string.whitespace + string.punctuation).encode())


def _spoken_bytes(token: bytes) -> int:
    return sum(1 for b in token if b not in _SILENT)
