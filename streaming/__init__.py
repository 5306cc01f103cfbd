"""Streaming recognition: the causal encoder (block mask, caches), streaming decoders, the engine and
the offline baseline, all behind `events.StreamingRecognizer`."""
