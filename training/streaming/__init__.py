"""Streaming recognition: the causal encoder (block mask, caches), streaming decoders, the engine and
the baselines (offline, LocalAgreement-2, AlignAtt), all behind `events.StreamingRecognizer`."""
