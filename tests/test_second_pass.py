"""Two-pass streaming on real speech and real tiny.en weights: fast causal partials, finals confirmed by the
original weights on audio ⊕ hush word."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluation.sets import load_realspeech
from evaluation.streamed import evaluate_records, stream_all
from streaming.events import norm_word
from streaming.second_pass import TwoPassStreaming, agreed
from streaming.verifier import Verifier, echo_length

HUSH = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "hush_word_tiny.en"


@pytest.fixture(scope="module")
def tiny():
    from data.weights import load_model

    return load_model("tiny.en")


@pytest.fixture(scope="module")
def utterances(realspeech: Path):
    # CMU ARCTIC: not among the committed hush word's training utterances (synthetic speech + 20 LJSpeech clips)
    return load_realspeech(realspeech, ("cmu_arctic",), limit={"cmu_arctic": 2})


def test_words_agree_by_their_letters_and_digits():
    assert norm_word("Most,") == norm_word("most") and norm_word("it's") == "it's"
    assert agreed(["The", "cat,", "sat"], ["the", "cat", "stood"]) == 2
    assert agreed(["a"], []) == 0 and agreed(["...", "a"], ["!", "a"]) == 0  # punctuation alone never agrees


def test_an_echo_of_the_final_words_is_cut():
    """Forced to continue after its final words, Whisper may say them again ("repeat" → "repeat repeat")."""
    assert echo_length([5], [5, 5]) == 2 and echo_length([1, 2, 3], [1, 2, 3, 1, 2, 3]) == 6
    assert echo_length([1, 2, 3], [1, 2, 3, 1, 2]) == 3  # whole copies of the final tail only
    assert echo_length([1, 2, 3], [2, 3, 9]) == 2 and echo_length([1, 2], [3, 4]) == 0 and echo_length([], [1]) == 0


def test_spoken_repeats_are_kept_and_a_loop_past_the_audio_is_cut(tiny, realspeech: Path):
    """A word said ten times is ten words, not a loop: the verifier keeps repeats its audio holds (cutting at the
    third copy, as before, kept two) and stops a repeating tail once it piles up at the audio's end."""
    from streaming.verifier import PILE_UP_WORDS, Verifier

    u = load_realspeech(realspeech, ("ljspeech",), limit={"ljspeech": 1})[0]
    first = u.words[0]  # "printing", then a pause
    word = u.audio[: (first[2] + 100) * 16].astype(np.float32)
    audio = np.concatenate([np.concatenate([word, np.zeros(4000, dtype=np.float32)]) for _ in range(10)])
    verifier = Verifier(tiny, None, "pad30")
    said = [norm_word(w) for w in verifier(audio, [], last=True).words]
    assert 8 <= len(said) <= 12 and set(said) == {norm_word(first[0])}, said
    # thirty copies for the ten spoken: the attention spreads some of the surplus over the spoken copies, the rest
    # piles up at the end and is cut there
    tokens = verifier.tokenizer.encode(" " + first[0])
    held = verifier._held([], tokens * 30)
    assert held is not None and len(said) - PILE_UP_WORDS <= held // len(tokens) < 30
    # with three copies final, a pass over three copies that says one more is an echo; over four, a word
    copy = len(audio) // 10
    mid_stream = Verifier(tiny, None, "zeros_5s")
    assert mid_stream(audio[: 3 * copy], tokens * 3).words == []
    fourth = [norm_word(w) for w in mid_stream(audio[: 4 * copy], tokens * 3).words]  # echo_length alone: []
    assert fourth and set(fourth) == {norm_word(first[0])}, fourth


def test_two_pass_finals_are_monotone_early_and_as_good_as_offline(tiny, utterances):
    from streaming.hush.frontend import load_hush_word
    from streaming.baselines.offline import OfflineWhisper
    from streaming.engine import CausalStreamingEngine

    causal = CausalStreamingEngine(tiny, 300, 600, pad_silence=True)
    system = TwoPassStreaming(causal, Verifier(tiny, load_hush_word(HUSH), "hush"), every_ms=600,
                              self_agreement=True)
    records = stream_all(system, utterances, 300)
    for record in records:
        committed: tuple[str, ...] = ()
        for step in record.steps:
            assert step.hypothesis.committed[: len(committed)] == committed  # finals are never revised
            committed = step.hypothesis.committed
        assert record.steps[-1].final and not record.steps[-1].hypothesis.tentative
    assert system.passes >= 2  # every 600 ms, plus the end of the stream
    early = [e for r in records for e in r.final_words() if e.emission_ms < r.audio_ms]
    assert early, "no word became final before the end of the stream"
    ours = evaluate_records(records, utterances)["wer"]
    alone = evaluate_records(stream_all(causal, utterances, 300), utterances)["wer"]
    offline = evaluate_records(stream_all(OfflineWhisper(tiny), utterances, 1000), utterances)["wer"]
    assert ours <= offline + 0.05, (ours, offline)
    assert ours < alone  # the verifier fixes what the original weights get wrong on partial audio


def test_bad_settings_are_refused(tiny):
    from streaming.engine import CausalStreamingEngine

    with pytest.raises(ValueError, match="hush word"):
        Verifier(tiny, None, "hush")
    with pytest.raises(ValueError, match="hush word"):
        Verifier(tiny, None, "zeros_5s", final_condition="hush")
    with pytest.raises(ValueError, match="every_ms"):
        TwoPassStreaming(CausalStreamingEngine(tiny, 300, 600), Verifier(tiny, None, "noise_5s"), every_ms=0)
    assert Verifier(tiny, None, "noise_5s")(np.zeros(16000, dtype=np.float32), []).words == []


def test_the_verifier_gives_each_word_its_lowest_token_probability(tiny, utterances):
    from streaming.verifier import Verifier

    heard = Verifier(tiny, None, "pad30")(utterances[0].audio.astype(np.float32), [], last=True)
    assert heard.words and len(heard.probs) == len(heard.words) == len(heard.tokens)
    assert all(0.0 < p <= 1.0 for p in heard.probs)
    assert max(heard.probs) > 0.5  # a clean read sentence: Whisper is sure of most of it


def test_a_phrase_said_again_is_found_past_the_final_words():
    from streaming.verifier import restatement, spoken_again

    keys = "the old pan was covered the old pan was covered".split()
    assert restatement(keys, 0) == (5, 5)
    assert restatement(keys, 10) is None  # wholly final already: not this pass's to judge
    assert restatement("zero zero zero zero".split(), 0) is None  # a word said again is not a phrase
    assert restatement("a b a b".split(), 0) is None and restatement(["", "", "", "", "", ""], 0) is None
    ends = [0.5, 1.0, 1.5, 2.0, 2.5, 2.6, 2.65, 2.7, 2.75, 2.8]  # the copy squeezed into 0.3 s after 2.5 s of speech
    assert not spoken_again(ends, 5, 5)
    assert spoken_again([0.5, 1.0, 1.5, 2.0, 2.5, 3.2, 3.7, 4.2, 4.7, 5.2], 5, 5)


def test_a_sentence_the_audio_says_once_is_not_said_twice_and_one_said_twice_is_kept(tiny, utterances):
    """The last pass must not end "X. X." where the speaker said X once (Whisper restating its sentence into the
    padding), and must keep a sentence the speaker did say twice."""
    u = utterances[0]
    audio = u.audio.astype(np.float32)
    verifier = Verifier(tiny, None, "zeros_5s", final_condition="pad30_features")
    once = verifier(audio, [], last=True)
    sentence = [t for g in once.tokens for t in g]
    assert len(once.words) >= 5, once.words
    # the whole sentence said again after itself, on audio that holds it once: the alignment squeezes the copy
    assert verifier._restated([], sentence + sentence) == len(sentence)
    assert verifier._restated(sentence, sentence) == 0  # ... also where the first saying is final already
    twice = np.concatenate([audio, np.zeros(8000, dtype=np.float32), audio])
    said = verifier(twice, [], last=True)
    assert len(said.words) >= 2 * len(once.words) - 2, (once.words, said.words)
    sentence_twice = [t for g in said.tokens for t in g]
    assert verifier._restated([], sentence_twice) is None


def test_a_loop_inside_one_word_is_said_once(tiny):
    """A token loop inside one word ("keb-f-f-f-…") piles up no words at the audio's end; where it exhausts the
    pass's token budget, one copy of the repeating unit is kept."""
    from whisper.tokenizer import get_tokenizer

    from streaming.verifier import one_copy

    tok = get_tokenizer(False, language="en", task="transcribe")
    head, unit = tok.encode(" reading keb"), tok.encode("-f")
    looped = head + unit * 70
    kept = looped[: one_copy(looped)]
    assert tok.decode(kept) == " reading keb-f", tok.decode(kept)
    assert one_copy(head) == len(head)
