from data.splits import assign_split
from data.text import normalize_transcript, transcript_words
from data.tokens import get_tokenizer, token_end_times, word_tokens
from data.types import WordSpan


def test_transcript_words_keep_display_text_and_glue_punctuation():
    words = transcript_words("— God bless 'em, I hope I'll go on — seeing them forever.")
    assert [w.norm for w in words] == ["god", "bless", "em", "i", "hope", "i'll", "go", "on", "seeing", "them", "forever"]
    assert words[0].text == "— God" and words[7].text == "on —" and words[-1].text == "forever."
    assert normalize_transcript("Hello,   WORLD!") == "hello world"


def test_word_tokens_concatenate_to_the_whole_transcript():
    text = "Printing, in the only sense with which we are at present concerned, differs from most"
    words = [w.text for w in transcript_words(text)]
    flat = [t for ts in word_tokens("english", words) for t in ts]
    assert flat == get_tokenizer("english").encode(" " + text)


def test_token_end_times_are_proportional_to_spoken_characters():
    tokens = word_tokens("english", ["Whittemore.", "cat"])
    assert len(tokens[0]) == 5  # ' Wh' 'itt' 'em' 'ore' '.'
    ends = token_end_times(tokens, [WordSpan("Whittemore.", 100, 1000), WordSpan("cat", 1100, 1400)], "english")
    # 2, 3, 2, 3 spoken bytes of 10 -> 20 %, 50 %, 70 %, 100 % of 900 ms; the full stop ends with the word
    assert ends == [280, 550, 730, 1000, 1000, 1400]
    assert all(a <= b for a, b in zip(ends, ends[1:]))


def test_token_end_times_reject_mismatched_lengths():
    import pytest

    with pytest.raises(ValueError):
        token_end_times([[1], [2]], [WordSpan("a", 0, 1)], "english")


def test_split_assignment_is_stable_and_proportional():
    splits = {"train": 0.8, "dev": 0.1, "test": 0.1}
    names = [assign_split(f"spk{i}", splits, "salt") for i in range(2000)]
    assert names == [assign_split(f"spk{i}", dict(reversed(splits.items())), "salt") for i in range(2000)]
    share = names.count("train") / len(names)
    assert 0.76 < share < 0.84
    assert set(names) == {"train", "dev", "test"}
    assert [assign_split(f"spk{i}", splits, "other") for i in range(50)] != names[:50]


def test_written_form_turns_prompts_in_capitals_into_sentences_and_leaves_written_text():
    from data.text import written_form

    assert written_form("WE CALL IT BEAR") == "We call it bear."
    assert written_form("I'M SURE I KNOW") == "I'm sure I know."
    assert written_form("ZERO THREE FIVE ONE") == "Zero three five one."
    assert written_form("IS IT TRUE?") == "Is it true?"
    assert written_form("Dr. Smith went to Washington") == "Dr. Smith went to Washington"  # already written
    assert written_form("2287") == "2287" and written_form("") == ""
