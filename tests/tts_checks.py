"""What the synthetic-speech tests (test_tts_kokoro) checks."""

from __future__ import annotations


def assert_whisper_understands(items: list, n: int) -> None:
    """tiny.en transcribes the first ``n`` corpus items with WER < 30 %: the speech says the text."""
    import soundfile as sf

    from evaluation.metrics.wer import utterance_wer
    from data.weights import load_model

    model = load_model("tiny.en", allow_download=False)
    for it in items[:n]:
        audio, _ = sf.read(it.audio_path, dtype="float32")
        hyp = model.transcribe(audio, language="en", temperature=0.0, beam_size=None, without_timestamps=True,
                               condition_on_previous_text=False, fp16=False)["text"].strip()
        assert utterance_wer(it.transcript, hyp) < 0.3, (it.transcript, hyp)
