"""Two-pass streaming's finalisation and partials rules, on scripted causal and verifier answers (no model): what
becomes final, when a pass runs, what is shown past the finals. The models themselves: ``test_second_pass.py``."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.events import Hypothesis
from streaming.second_pass import TwoPassStreaming

class _Scripted:
    """A causal engine / verifier that answers a scripted word list: the finalisation rules alone, no model."""

    lookahead_ms = 0.0

    def __init__(self, answers: list[list[str]]) -> None:
        self.answers = answers

    def reset(self) -> None:
        pass

    def feed(self, samples):
        from streaming.events import Hypothesis

        return Hypothesis((), tuple(self.answers.pop(0)))

    def __call__(self, audio, final_tokens, last=False, prompt=None):
        from streaming.verifier import VerifierWords

        words = self.answers.pop(0)
        return VerifierWords(words, [[i] for i, _ in enumerate(words)])


def test_the_word_at_the_cut_edge_waits():
    causal = _Scripted([["unless", "a", "system", "is", "a"]])
    verifier = _Scripted([["unless", "a", "system", "is", "a", "stem."]])
    # both models hear the start of "established" as "a": the last word of either is not final yet
    system = TwoPassStreaming(causal, verifier, every_ms=300)
    assert system.feed(np.zeros(4800, dtype=np.float32)).committed == ("unless", "a", "system", "is")


def test_a_final_word_the_causal_transcript_lacks_does_not_stop_agreement():
    chunk = np.zeros(4800, dtype=np.float32)
    causal = _Scripted([["unless", "a", "system", "is", "a", "stem"],
                        ["unless", "a", "system", "is", "established", "for", "the", "frequent"]])
    verifier = _Scripted([["unless", "a", "system", "is", "a", "stem."],
                          ["established", "for", "the", "frequent", "formal"]])
    system = TwoPassStreaming(causal, verifier, every_ms=300)
    assert system.feed(chunk).committed == ("unless", "a", "system", "is", "a")
    # one-for-one, the causal tail would start at "for" and never agree with the verifier again; one word earlier
    # it agrees (and, again, the last word of either waits)
    hypothesis = system.feed(chunk)
    assert hypothesis.committed[5:] == ("established", "for", "the") and hypothesis.tentative == ("frequent",)


def test_final_words_outnumbering_the_causal_ones_leave_an_empty_tail():
    chunk = np.zeros(4800, dtype=np.float32)
    causal = _Scripted([["one", "two", "three", "four"], ["one"]])
    verifier = _Scripted([["one", "two", "three", "four", "five"]])
    system = TwoPassStreaming(causal, verifier, every_ms=300)
    assert system.feed(chunk).committed == ("one", "two", "three")
    # the causal engine took words back (its stability rule): nothing past the finals, no pass worth running
    assert system.feed(chunk) == Hypothesis(("one", "two", "three"), ())


class _ScriptedCausal(_Scripted):
    """A causal engine answering scripted hypotheses (committed and tentative words)."""

    def feed(self, samples):
        return self.answers.pop(0)


def test_partials_show_what_each_policy_trusts():
    from streaming.second_pass import PARTIALS

    chunk = np.zeros(4800, dtype=np.float32)
    script = [Hypothesis(("the",), ("cat",)), Hypothesis(("the",), ("cap", "sat")),
              Hypothesis(("the", "cap"), ("sat", "on"))]
    shown = {}
    for partials in PARTIALS:  # no verifier pass (every 10 s): no finals, only the partials differ
        system = TwoPassStreaming(_ScriptedCausal(list(script)), _Scripted([]), every_ms=10_000, partials=partials)
        shown[partials] = [system.feed(chunk).tentative for _ in script]
    assert shown["causal"] == [("the", "cat"), ("the", "cap", "sat"), ("the", "cap", "sat", "on")]
    assert shown["verifier-fresh"] == [(), (), ()]  # no pass yet: nothing of the verifier's to show
    with pytest.raises(ValueError, match="partials"):
        TwoPassStreaming(_ScriptedCausal([]), _Scripted([]), partials="everything")
    with pytest.raises(ValueError, match="partials"):  # a policy measured and not adopted is gone
        TwoPassStreaming(_ScriptedCausal([]), _Scripted([]), partials="verifier-held")


def test_fresh_partials_are_the_verifiers_open_words_but_the_last():
    system = TwoPassStreaming(_Scripted([["unless", "a", "system", "is", "a"]]),
                              _Scripted([["unless", "a", "system", "is", "a", "stem."]]), every_ms=600,
                              partials="verifier-fresh")
    first = system.feed(np.zeros(9600, dtype=np.float32))  # a pass: "a stem." stays open (the last word waits)
    assert first == Hypothesis(("unless", "a", "system", "is"), ("a",))  # "stem." may be cut mid-word


def test_restart_at_finds_where_the_open_words_say_again_what_was_written():
    from streaming.events import restart_at as at
    from streaming.second_pass import RESTART_CONTEXT, RESTART_WORDS

    def restart_at(written, words):
        return at(written, words, RESTART_WORDS, RESTART_CONTEXT)

    written = ["the", "earliest", "book", "printed", "with"]
    # Whisper filling the zeros after the audio: the sentence again, from its start
    assert restart_at(written, ["movable", "ties.", "The", "earliest", "book"]) == 2
    # within the open words themselves ("block book, produced the block book")
    assert restart_at(["produced,", "the"], ["block", "book,", "produced", "the", "block", "book,"]) == 2
    assert restart_at(["produced,", "the"], ["block", "books", "which", "were"]) == 4  # no restart
    assert restart_at(["of", "the", "house"], ["and", "the", "garden"]) == 3  # one word again is speech
    assert restart_at([], []) == 0
    # spoken digits said again: a restart of the same word, unless the run must hold two different words
    assert at(["0", "0"], ["0", "0", "1"], 2, 12) == 0
    assert at(["0", "0"], ["0", "0", "1"], 2, 12, distinct=2) == 3
    assert at(["Montreal", "Forest,"], ["liner.", "Montreal", "Forest,"], 2, 12, distinct=2) == 1


def test_a_whole_restart_says_again_all_that_followed_its_first_saying():
    from streaming.events import restart_at

    # dev LJ001-0015: a sentence that says "should be" twice is speech, not Whisper restarting
    written = ["letters", "should", "be", "beautiful", "and", "that"]
    words = ["should", "be", "reasonable", "and", "a", "help"]
    assert restart_at(written, words, 2, 12, distinct=2) == 0
    assert restart_at(written, words, 2, 12, distinct=2, whole=True) == 6
    # a restart from the written words: the open words say all the rest again, then end
    assert restart_at(["produced", "the", "block", "book"], ["which", "were", "produced", "the", "block", "book",
                                                             "which"], 2, 12, distinct=2, whole=True) == 2
    # within the open words, and cut by the pass's end mid-way
    assert restart_at(["produced,", "the"], ["block", "book,", "produced", "the", "block"], 2, 12, whole=True) == 2
    # a run said again that then goes its own way is not a whole restart
    assert restart_at(["the", "block", "book"], ["the", "block", "print"], 2, 12, whole=True) == 3
    # the first run that qualifies wins, not the first repeat
    assert restart_at(["a", "b", "c", "d"], ["a", "b", "x", "y", "a", "b", "x"], 2, 12, whole=True) == 4
    # synthetic dev, live: the first saying split a word the restart joins; a long run counts, whole or not
    said = ["The", "kids", "built", "a", "huge", "sand", "castle", "on", "the", "beach."]
    again = ["The", "kids", "built", "a", "huge", "sandcastle", "on"]
    assert restart_at(said, again, 2, 12, distinct=2, whole=True) == 7
    assert restart_at(said, again, 2, 12, distinct=2, whole=True, long=4) == 0
    assert restart_at(written, words, 2, 12, distinct=2, whole=True, long=4) == 6  # "should be" twice: 2 words


def test_fresh_partials_stop_at_a_restart_and_hold_the_last_word():
    looping = ["produced,", "the", "block", "book,", "produced", "the", "block", "book,", "produced"]
    fresh = TwoPassStreaming(_Scripted([["produced", "the", "block"]]), _Scripted([list(looping)]), every_ms=300,
                             partials="verifier-fresh")
    hypothesis = fresh.feed(np.zeros(4800, dtype=np.float32))
    assert hypothesis.committed == ("produced,", "the")  # agreed with the causal words, the last held
    # open: "block book, produced the block …": "produced the" again starts a restart; "book," (the last) waits
    assert hypothesis.tentative == ("block",)


def test_a_restart_two_passes_agree_on_is_not_finalised_mid_stream():
    # the dev split's spontaneous clip: speech, then 5 s of zeros the verifier fills by saying the sentence again,
    # alike at two passes in a row, so self-agreement finalised the restart
    chunk = np.zeros(4800, dtype=np.float32)
    said = ["Montreal", "Forest,", "what's", "called", "a"]
    # a pass answers the words past the final ones: "a liner." and then the sentence again, twice alike
    again = ["liner.", "Montreal", "Forest,", "what's", "called", "a", "liner.", "Montreal"]

    def system(cut: int) -> TwoPassStreaming:
        causal = _Scripted([said, [*said, "liner."], [*said, "liner."]])
        verifier = _Scripted([list(said), ["a", *again], [*again, "Forest,"]])
        return TwoPassStreaming(causal, verifier, every_ms=300, self_agreement=True, verifier_restart_words=cut)

    off, cut = system(0), system(2)
    finals_off = [off.feed(chunk).committed for _ in range(3)][-1]
    finals_cut = [cut.feed(chunk).committed for _ in range(3)][-1]
    # the restart, final: two passes agree on all of it but the last word
    assert finals_off == (*said, *again[:-1])
    # final up to where the open words start saying "Montreal Forest," again
    assert finals_cut == (*said, "liner.")
    with pytest.raises(ValueError, match="verifier_restart_words"):
        TwoPassStreaming(_Scripted([]), _Scripted([]), verifier_restart_words=-1)
    with pytest.raises(ValueError, match="verifier_restart_long"):  # a length that would be silently ignored
        TwoPassStreaming(_Scripted([]), _Scripted([]), verifier_restart_words=2, verifier_restart_long=4)


def test_the_spec_offers_every_partials_policy():
    """recognizer.spec does not import streaming/ (torch), so the spec's Literal is a copy of PARTIALS: kept equal."""
    from typing import get_args, get_type_hints

    from recognizer.spec import SecondPass
    from streaming.second_pass import PARTIALS

    assert get_args(get_type_hints(SecondPass)["partials"]) == PARTIALS


def test_unsure_verifier_words_are_not_shown():
    """``partial_min_prob``: the verifier's partials end before its first open word with an unsure token; the
    finals are what they were."""
    from streaming.verifier import VerifierWords

    words = ["the", "block", "book", "produced", "the"]
    probs = [0.95, 0.9, 0.3, 0.9, 0.8]
    assert VerifierWords(words, [[i] for i in range(5)], probs).confident(0.5) == 2
    assert VerifierWords(words, [[i] for i in range(5)], probs).confident(0.2) == 5
    assert VerifierWords(words, [[i] for i in range(5)]).confident(0.99) == 5  # no probabilities: certain

    class Unsure(_Scripted):
        def __call__(self, audio, final_tokens, last=False, prompt=None):
            said = self.answers.pop(0)
            return VerifierWords(said, [[i] for i, _ in enumerate(said)], probs[: len(said)])

    def shown(min_prob: float) -> tuple[tuple[str, ...], tuple[str, ...]]:
        # causal words the verifier does not agree with: nothing final, the verifier's words all open
        system = TwoPassStreaming(_Scripted([["um", "uh"]]), Unsure([list(words)]), every_ms=300,
                                  partials="verifier-fresh", partial_min_prob=min_prob)
        hyp = system.feed(np.zeros(4800, dtype=np.float32))
        return hyp.committed, hyp.tentative

    assert shown(0.0) == ((), tuple(words[:-1]))  # all but the word the audio's edge may cut
    assert shown(0.5) == ((), ("the", "block"))  # up to "book", which the pass was unsure of
    assert shown(0.2) == shown(0.0)  # every word sure: the edge word still waits
    with pytest.raises(ValueError, match="partial_min_prob"):
        TwoPassStreaming(_Scripted([]), _Scripted([]), partial_min_prob=1.0)


def test_a_heartbeat_asks_the_verifier_when_the_causal_engine_goes_quiet():
    """On a list said aloud the causal engine stops writing the repeats: with an empty causal tail and a pass that
    found nothing open, ``_worth_a_pass`` never asks again, and every word waits for the segment's end. A heartbeat
    asks anyway once ``heartbeat_ms`` of audio that is not quiet has arrived; over quiet audio it never asks."""
    loud = (0.1 * np.sin(np.arange(4800) / 5)).astype(np.float32)
    quiet = np.zeros(4800, dtype=np.float32)

    def run(chunk, heartbeat_ms, answers):
        system = TwoPassStreaming(_Scripted([[] for _ in range(8)]), _Scripted(answers), every_ms=300,
                                  self_agreement=True, heartbeat_ms=heartbeat_ms)
        return [system.feed(chunk).committed for _ in range(8)], system.passes

    # no causal words and no pass yet: without a heartbeat the verifier is never asked (an empty script would raise)
    assert run(loud, None, []) == ([()] * 8, 0)
    assert run(quiet, 600, []) == ([()] * 8, 0)
    committed, passes = run(loud, 600, [["zero"], ["zero", "zero"], ["zero", "zero", "zero"],
                                        ["zero", "zero", "zero"]] + [["zero"]] * 4)
    assert passes >= 3  # the first at 600 ms, then every chunk while a pass holds open words
    assert committed[1] == () and len(committed[-1]) >= 2 and set(committed[-1]) == {"zero"}
    with pytest.raises(ValueError, match="heartbeat_ms"):
        TwoPassStreaming(_Scripted([]), _Scripted([]), every_ms=600, heartbeat_ms=300)


def test_a_last_word_clear_of_the_audio_edge_need_not_wait():
    """``hold_last`` holds the last word of a pass (the edge may cut inside it). With ``hold_last_edge_ms`` a last
    word the verifier's alignment ends at least that far before the audio's end is final at once; one ending
    nearer the edge still waits."""

    class Aligned(_Scripted):
        def __init__(self, answers, ends):
            super().__init__(answers)
            self.ends = ends

        def word_ends(self, words):
            assert self.ends is not None, "the alignment was asked for with no word held"
            return self.ends[: len(words)]

    chunk = np.zeros(4800, dtype=np.float32)  # 0.3 s: the audio ends at 0.3 s

    def finals(ends, edge_ms):
        system = TwoPassStreaming(_Scripted([["the", "cat"]]), Aligned([["the", "cat"]], ends), every_ms=300,
                                  hold_last_edge_ms=edge_ms)
        return system.feed(chunk).committed

    assert finals([0.1, 0.2], None) == ("the",)  # held: the last word of both waits a pass
    assert finals([0.1, 0.2], 50) == ("the", "cat")  # "cat" ends 100 ms before the edge
    assert finals([0.1, 0.28], 50) == ("the",)  # 20 ms before it: the edge may be inside "cat"
    assert finals([0.25, 0.28], 100) == ("the",)  # neither is clear: the plain hold, as without an edge
    # the two agree on "the" alone, far from either's last word: no hold cuts it, the alignment is not asked for
    system = TwoPassStreaming(_Scripted([["the", "dog", "sat"]]), Aligned([["the", "cat", "sat"]], None),
                              every_ms=300, hold_last_edge_ms=50)
    assert system.feed(chunk).committed == ("the",)
    with pytest.raises(ValueError, match="hold_last_edge_ms"):
        TwoPassStreaming(_Scripted([]), _Scripted([]), hold_last_edge_ms=0)
