"""Streaming decoders: exact against openai-whisper offline, stability rule, commit rules."""

from __future__ import annotations

from pathlib import Path

import pytest
import soundfile as sf
import torch
import whisper
from whisper.tokenizer import get_tokenizer

from streaming.beam import StreamingBeamDecoder
from streaming.decoding import StreamingGreedyDecoder, split_words


@pytest.fixture(scope="module")
def tiny():
    from data.weights import load_model

    return load_model("tiny.en")


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():  # scoped: a global set_grad_enabled(False) would leak into other test modules
        yield


@pytest.fixture(scope="module")
def tokenizer():
    return get_tokenizer(False)


def _features(model, path: Path):
    audio = torch.from_numpy(sf.read(path, dtype="float32")[0])
    mel = whisper.log_mel_spectrogram(whisper.pad_or_trim(audio))
    return mel, model.encoder(mel[None])[0]


@pytest.mark.parametrize("utt", ["cmu_arctic/wav/cmu_us_axb_a0004", "ljspeech/wav/LJ001-0008"])
def test_decoders_on_full_audio_equal_whisper_decode(tiny, tokenizer, realspeech: Path, utt: str):
    """With all audio at once, our cached decoder forward + greedy/beam equal whisper.decode exactly."""
    mel, features = _features(tiny, realspeech / f"{utt}.wav")
    greedy = StreamingGreedyDecoder(tiny, tokenizer)
    state = greedy.new_state()
    greedy.update(state, features, final=True)
    ref = whisper.decode(tiny, mel, whisper.DecodingOptions(language="en", without_timestamps=True, fp16=False))
    assert state.tokens == ref.tokens
    hyp = greedy.hypothesis(state)
    assert hyp.tentative == () and " ".join(hyp.committed) == ref.text.strip()

    beam = StreamingBeamDecoder(tiny, tokenizer, beam_size=5)
    bstate = beam.new_state()
    beam.update(bstate, features, final=True)
    ref5 = whisper.decode(tiny, mel, whisper.DecodingOptions(language="en", without_timestamps=True, fp16=False, beam_size=5))
    assert beam.best(bstate).tokens == ref5.tokens


def test_greedy_on_growing_audio_keeps_committed_tokens(tiny, tokenizer, realspeech: Path):
    """Feed 30 s-padded encoder frames in growing prefixes: committed words only ever extend."""
    from evaluation.metrics import utterance_wer

    mel, features = _features(tiny, realspeech / "ljspeech/wav/LJ001-0001.wav")
    n_speech = int(sf.info(realspeech / "ljspeech/wav/LJ001-0001.wav").duration * 50)
    reference = (realspeech / "ljspeech/transcripts.tsv").read_text().splitlines()[0].split("\t")[1]
    for policy in ("exact", "reuse"):
        dec = StreamingGreedyDecoder(tiny, tokenizer, cache_policy=policy)
        state = dec.new_state()
        committed: tuple[str, ...] = ()
        for start in [0, *range(100, n_speech, 25)]:  # a 2 s first block, then 0.5 s chunks
            dec.update(state, features[start : start + (100 if start == 0 else 25)])
            hyp = dec.hypothesis(state)
            assert hyp.committed[: len(committed)] == committed, policy
            committed = hyp.committed
        dec.update(state, features[n_speech:n_speech + 1], final=True)
        final = dec.hypothesis(state)
        assert final.committed[: len(committed)] == committed and not final.tentative
        # The original (not fine-tuned) model restarts sentences on truncated audio, the gap the
        # causal fine-tuning closes; here only the opening words are checked.
        assert utterance_wer(" ".join(reference.split()[:5]), " ".join(final.committed[:5])) == 0, final.committed


def test_eot_waits_for_audio_and_silence_emits_nothing(tiny, tokenizer):
    """On silence, greedy stops at EOT and appends nothing (no token forced at stream start)."""
    mel = whisper.log_mel_spectrogram(torch.zeros(16000 * 2))
    features = tiny.encoder(whisper.pad_or_trim(mel, 3000)[None])[0][:50]
    dec = StreamingGreedyDecoder(tiny, tokenizer)
    state = dec.new_state()
    dec.update(state, features)
    assert state.tokens == [] and not state.ended


def test_split_words_commits_only_closed_words(tokenizer):
    tokens = tokenizer.encode(" Hello wonderful world")
    # all committed but the last token: the last word stays tentative
    hyp = split_words(tokenizer, tokens, len(tokens) - 1)
    assert hyp.committed[:1] == ("Hello",) and hyp.tentative[-1] == "world"
    # a word whose next token continues it is not closed until that token is committed
    pieces = tokenizer.encode(" Whittemore")
    assert len(pieces) > 1
    hyp = split_words(tokenizer, tokenizer.encode(" Hi") + pieces, 2)
    assert hyp.committed == ("Hi",) and hyp.tentative == ("Whittemore",)
    # "most" is not closed while the token after it (here ",") is tentative
    most = tokenizer.encode(" from most, if")
    assert split_words(tokenizer, most, 2).committed == ("from",)
    assert split_words(tokenizer, most, 3).committed == ("from",)
    assert split_words(tokenizer, most, 4).committed == ("from", "most,")
    assert split_words(tokenizer, tokens, len(tokens)).committed == ("Hello", "wonderful")
    assert split_words(tokenizer, tokens, len(tokens), final=True).committed == ("Hello", "wonderful", "world")


def test_reuse_policy_with_fewer_tokens_than_the_check_window(tiny, tokenizer, realspeech: Path):
    """Regression: with < n_check tokens emitted, the reused-cache pass started one row too late."""
    _, features = _features(tiny, realspeech / "cmu_arctic/wav/cmu_us_aew_a0001.wav")
    exact, reuse = (StreamingGreedyDecoder(tiny, tokenizer, n_check=4, cache_policy=p) for p in ("exact", "reuse"))
    states = exact.new_state(), reuse.new_state()
    for start in range(0, 150, 15):
        for dec, state in zip((exact, reuse), states):
            dec.update(state, features[start : start + 15])
        # with at most n_check tokens nothing is stale yet: both policies agree exactly
        if len(states[0].tokens) <= 4:
            assert states[0].tokens == states[1].tokens


def _rescored(dec, frames, tokens: list[int]) -> list[torch.Tensor]:
    """Filtered log-probabilities at text positions 0…len(tokens) from a fresh, uncached decoder pass over
    `frames` (the audio heard so far): what the stability rule must compare against."""
    cache = dec.decoder.new_cache(pad=dec.pad)
    dec.decoder.append_audio(cache, frames)
    logits = dec._run(cache, dec.prefix + tokens, 0)
    p = len(dec.prefix)
    return [dec._logprobs(logits[p - 1 + i], i) for i in range(len(tokens) + 1)]


def test_greedy_stability_rule_cuts_a_word_heard_half(tiny, tokenizer, realspeech: Path, one_torch_thread):
    """Definition 1 / Algorithm 1 forced: on 1 s of "...in being comparatively modern" greedy emits
    " comparative,"; 0.5 s later " comparative" fails both eq. 18 (its log-prob dropped) and eq. 19 (no longer the
    argmax), so the hypothesis is cut there and greedy resumes (" comparatively mod…"). Without the rule the stale
    token would stay."""
    _, features = _features(tiny, realspeech / "ljspeech/wav/LJ001-0002.wav")
    n_speech = int(sf.info(realspeech / "ljspeech/wav/LJ001-0002.wav").duration * 50)
    dec = StreamingGreedyDecoder(tiny, tokenizer, n_check=2, cache_policy="exact")
    state = dec.new_state()
    cuts, unexplained = [], []
    for start in [0, *range(50, n_speech, 25)]:  # a 1 s first block, then 0.5 s chunks
        end = start + (50 if start == 0 else 25)
        before, before_lp, committed = list(state.tokens), list(state.logprobs), state.committed
        dec.update(state, features[start:end])
        checked_from = max(committed, len(before) - dec.n_check)
        # tokens older than the checked window (the committed prefix) are never touched, nor are their scores
        assert state.tokens[:checked_from] == before[:checked_from]
        assert state.logprobs[:checked_from] == before_lp[:checked_from]
        # every token in and after the checked window carries its log-prob on the audio heard now (re-scored)
        now = _rescored(dec, features[:end], state.tokens)
        for pos in range(checked_from, len(state.tokens)):
            assert state.logprobs[pos] == pytest.approx(float(now[pos][state.tokens[pos]]), abs=1e-4), pos
        if state.tokens[: len(before)] == before:
            continue
        cut = next(i for i in range(len(before)) if i >= len(state.tokens) or state.tokens[i] != before[i])
        old = _rescored(dec, features[:end], before)
        change = (start, cut, checked_from, committed,
                  tokenizer.decode(before[cut:]), tokenizer.decode(state.tokens[cut:]))
        # a cut is the first checked token failing both eq. 18 (log-prob dropped) and eq. 19 (not the argmax);
        # every checked token before it satisfied one of them; greedy resumes with the argmax on the longer audio
        kept_ok = all(float(old[pos][before[pos]]) >= before_lp[pos] - 1e-4 or int(old[pos].argmax()) == before[pos]
                      for pos in range(checked_from, cut))
        fails = float(old[cut][before[cut]]) < before_lp[cut] and int(old[cut].argmax()) != before[cut]
        resumed = state.tokens[cut:cut + 1] in ([int(old[cut].argmax())], [])
        (cuts if kept_ok and fails and resumed else unexplained).append(change)
    assert cuts, f"no checked token was ever cut by the stability rule (other changes: {unexplained})"
    start, cut, checked_from, committed, dropped, resumed = cuts[0]
    assert start == 50 and committed > 0 and cut >= checked_from  # the cut left the committed prefix alone
    assert dropped == " comparative," and resumed.startswith(" comparatively"), cuts[0]
    assert not unexplained, f"hypothesis changes the stability rule does not explain: {unexplained}"


@pytest.fixture(scope="module")
def silence_frames(tiny):
    """Whisper's encoder frames of 30 s of silence: the pad for the positions not heard yet (textdecoder.CrossCache)."""
    with torch.no_grad():
        return tiny.encoder(whisper.log_mel_spectrogram(torch.zeros(16000 * 30))[None])[0]


def test_beam_cuts_to_the_stable_prefix_and_waits_at_eot(tiny, tokenizer, realspeech: Path, silence_frames,
                                                         one_torch_thread):
    """Definition 3 / Algorithm 2 forced on "has never been surpassed": on 1 s of audio every beam reads
    " has never been Sir/so/sir"; 0.5 s later " Sir" is no longer among the top-b at its position, so the best beam is
    cut back to its stable prefix " has never been" and regrows (" surpassed"). At the end of the audio, EOT among
    the top-b candidates means "wait": nothing is finished and the stream goes on until final=True."""
    _, features = _features(tiny, realspeech / "ljspeech/wav/LJ001-0008.wav")
    n_speech = int(sf.info(realspeech / "ljspeech/wav/LJ001-0008.wav").duration * 50)
    b = 3
    dec = StreamingBeamDecoder(tiny, tokenizer, beam_size=b, n_check=2, pad_frames=silence_frames)
    rescore, rescored = dec._rescore, []

    def recorded_rescore(beam):  # the real method, observed: its decisions are checked against a fresh pass
        before, before_lp = list(beam.tokens), list(beam.token_logprobs)
        rescore(beam)
        rescored.append((before, before_lp, list(beam.tokens), list(beam.token_logprobs)))

    dec._rescore = recorded_rescore
    state = dec.new_state()
    best_cuts, committed = [], ()
    for start in [0, *range(50, n_speech, 25)]:  # a 1 s first block, then 0.5 s chunks
        end = min(n_speech, start + (50 if start == 0 else 25))
        best_before = list(dec.best(state).tokens)
        rescored.clear()
        dec.update(state, features[start:end])
        for before, before_lp, after, after_lp in rescored:
            checked_from = max(0, len(before) - dec.n_check)
            assert after == before[: len(after)] and len(after) >= checked_from  # cut only inside the checked window
            now = _rescored(dec, features[:end], before)
            top = [set(now[pos].topk(b).indices.tolist()) for pos in range(len(before))]
            # Def. 3: stable iff still among the top-b; the beam is cut at the first unstable checked token
            kept_unstable = [pos for pos in range(checked_from, len(after)) if before[pos] not in top[pos]]
            assert not kept_unstable, f"checked tokens no longer in the top-{b} were kept: {kept_unstable}"
            assert len(after) == len(before) or before[len(after)] not in top[len(after)], "a stable token was cut"
            # kept checked tokens are re-scored on the audio heard now; older ones keep their scores
            assert after_lp[:checked_from] == before_lp[:checked_from]
            assert after_lp[checked_from:] == pytest.approx([float(now[pos][before[pos]])
                                                             for pos in range(checked_from, len(after))], abs=1e-4)
            if before == best_before and len(after) < len(before):
                best = dec.best(state).tokens
                best_cuts.append((start, tokenizer.decode(before), tokenizer.decode(after), tokenizer.decode(best)))
                cut = len(after)  # regrown from the stable prefix with another token where the cut was
                assert best[:cut] == after and best[cut : cut + 1] != before[cut : cut + 1]
        # EOT before the end of the stream only ever means "wait"
        assert not state.ended and state.finished == [], "EOT finished a beam before final=True"
        hyp = dec.hypothesis(state)
        assert hyp.committed[: len(committed)] == committed
        committed = hyp.committed
    assert best_cuts, "the best beam was never cut: Definition 3's stability check never fired"
    assert best_cuts[0] == (50, " has never been Sir", " has never been", " has never been surpassed"), best_cuts

    # all the speech heard: EOT is among the top-b candidates, so decoding waits; more calls without audio change
    # nothing, and nothing is finished
    candidates = sorted(((beam.score + float(lp), int(t)) for beam in state.beams
                         for lp, t in zip(*beam.next_logprobs.topk(b + 1))), reverse=True)[:b]
    assert tokenizer.eot in [t for _, t in candidates]
    waiting = [list(beam.tokens) for beam in state.beams]
    dec.update(state, features[:0])
    assert [beam.tokens for beam in state.beams] == waiting and not state.ended and state.finished == []
    # final=True: the stream ends on finished (EOT) hypotheses
    dec.update(state, features[:0], final=True)
    assert state.ended and len(state.finished) >= 1
    best = dec.best(state)
    assert any(best is beam for beam in state.finished) and len(best.token_logprobs) == len(best.tokens) + 1
    final = dec.hypothesis(state)
    assert final.tentative == () and " ".join(final.committed) == "has never been surpassed."
    dec.update(state, features[n_speech : n_speech + 25])  # after the end, audio changes nothing
    assert " ".join(dec.hypothesis(state).committed) == "has never been surpassed."


def test_restart_cut_drops_open_words_that_say_the_transcript_again(tiny, tokenizer):
    """A run of ``restart_words`` words said again (within the last ``restart_context``) is cut from its first word,
    never into the committed tokens; one or two words again is speech and stays."""
    greedy = StreamingGreedyDecoder(tiny, tokenizer, restart_words=3)
    written = " which are an exact imitation of the"

    def state_for(text: str, committed_text: str):
        state = greedy.new_state()
        state.tokens = tokenizer.encode(text)
        state.logprobs = [0.0] * len(state.tokens)
        state.committed = len(tokenizer.encode(committed_text))
        state.cache.length = len(greedy.prefix) + len(state.tokens)
        return state

    state = state_for(written + " letters which are an exact imitation", written)
    greedy._cut_restart(state, state.committed, greedy.restart_words, greedy.restart_context)
    assert tokenizer.decode(state.tokens) == written + " letters"
    assert state.cache.length == len(greedy.prefix) + len(state.tokens) and len(state.logprobs) == len(state.tokens)

    state = state_for(written + " letters which are printed", written)  # two words again: kept
    greedy._cut_restart(state, state.committed, greedy.restart_words, greedy.restart_context)
    assert tokenizer.decode(state.tokens) == written + " letters which are printed"

    # the run starts inside the committed words: only the open part goes
    state = state_for(written + " which are an exact", written + " which")
    greedy._cut_restart(state, state.committed, greedy.restart_words, greedy.restart_context)
    assert tokenizer.decode(state.tokens) == written + " which"

    far = StreamingGreedyDecoder(tiny, tokenizer, restart_words=3, restart_context=4)  # the run is 7 words back
    state = state_for(written + " letters which are an exact", written)
    far._cut_restart(state, state.committed, far.restart_words, far.restart_context)
    assert tokenizer.decode(state.tokens) == written + " letters which are an exact"
    with pytest.raises(ValueError, match="restart_words"):
        StreamingGreedyDecoder(tiny, tokenizer, restart_words=-1)


def test_restart_cut_is_part_of_a_recognizer_spec():
    """The evaluate stage and serving build from one spec: a causal spec's cut is the adopted default
    (``streaming.engine.RESTART_WORDS``), said again from the last ``RESTART_CONTEXT`` words; a two-pass spec passes
    its own to its causal pass, and the stability window is the paper's in both."""
    from recognizer.build import build
    from recognizer.spec import CausalPass, RecognizerSpec
    from streaming.engine import N_CHECK, RESTART_CONTEXT, RESTART_WORDS

    def decoder(spec):
        recognizer = build(spec)[0].inner
        return getattr(recognizer, "engine", recognizer).decoder

    causal = decoder(RecognizerSpec("c", "causal", 300))
    assert (causal.restart_words, causal.restart_context, causal.n_check) == (RESTART_WORDS, RESTART_CONTEXT, N_CHECK)
    assert decoder(RecognizerSpec("c", "causal", 300, causal=CausalPass(restart_words=0))).restart_words == 0
    two_pass = decoder(RecognizerSpec("t", "two-pass", 300, causal=CausalPass(restart_words=5)))
    assert (two_pass.restart_words, two_pass.n_check) == (5, N_CHECK)
