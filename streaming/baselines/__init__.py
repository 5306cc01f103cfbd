"""The offline baseline behind `streaming.events.StreamingRecognizer`: :class:`OfflineWhisper`, the whole
utterance decoded once at the end (accuracy ceiling; mel hook for the hush-word front end). It takes an already
loaded openai-whisper model (shared, never modified) plus options.

The streaming policies compared against are the real ones from PyPI (whisperlivekit's LocalAgreement-2 and
SimulStreaming/AlignAtt: ``evaluation.peers``).
"""

from streaming.baselines.offline import PADDINGS, OfflineWhisper, decoding_language, pad30_mel

__all__ = ["PADDINGS", "OfflineWhisper", "decoding_language", "pad30_mel"]
