"""Streaming-Whisper baselines behind `training.streaming.events.StreamingRecognizer`:

- :class:`OfflineWhisper`: the whole utterance decoded once at the end (accuracy ceiling; mel hook for the
  hush-word front end);
- :class:`LocalAgreement2`: ufal/whisper_streaming's LocalAgreement-2 re-transcription policy;
- :class:`AlignAtt`: Simul-Whisper/SimulStreaming's attention-guided policy.

Each takes an already loaded openai-whisper model (shared, never modified) plus options.
"""

from training.streaming.baselines.alignatt import AlignAtt
from training.streaming.baselines.local_agreement import AgreementBuffer, LocalAgreement2, TimedWord
from training.streaming.baselines.offline import PADDINGS, OfflineWhisper, decoding_language, pad30_mel

__all__ = [
    "PADDINGS",
    "AgreementBuffer",
    "AlignAtt",
    "LocalAgreement2",
    "OfflineWhisper",
    "TimedWord",
    "decoding_language",
    "pad30_mel",
]
