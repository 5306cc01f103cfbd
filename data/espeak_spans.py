"""From espeak-ng events to transcript word spans (pure functions; ``data.espeak`` gives the events).

Timing rule (espeak-ng 1.51's event order, see ``word_spans``):

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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from data.espeak import EV_END, EV_MSG_TERMINATED, EV_PHONEME, EV_SENTENCE, EV_WORD, LINKING, SynthesisError
from data.text import normalize_word, transcript_words


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




def word_spans(text: str, events: Sequence[tuple[int, int, int, str]], n_samples: int,
               counts: Sequence[int]) -> list[tuple[str, int, int]]:
    """One (norm, start_sample, end_sample) per transcript word of ``text``, in order.

    ``events`` are (type, sample, text_position, phoneme name) in the order espeak emitted them;
    ``counts`` the isolated phoneme count of each transcript word. See the module docstring for
    the rule. What it rests on (espeak's events over the built-in texts × all voices): a phoneme
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
        if etype == EV_PHONEME:
            last_phoneme = (sample, name)
        if etype == EV_WORD:
            word_event_pos.append(text_pos - 1)
            follows_sound = last_phoneme is not None and not _is_pause(last_phoneme[1]) and sample > last_phoneme[0]
            word_event_start.append(sample if follows_sound else None)
            current = len(word_event_pos) - 1
        elif etype == EV_PHONEME and current >= 0:
            end = n_samples
            for later in events[k + 1:]:
                if later[1] > sample and later[0] in (EV_WORD, EV_PHONEME, EV_END, EV_SENTENCE, EV_MSG_TERMINATED):
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
        if name in LINKING and ph:
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
