"""Streaming recognition: the causal encoder (block mask, caches), streaming decoders, the engine and
the offline baseline, all behind `events.StreamingRecognizer`."""

import os

# oneDNN caches the kernels it generates per shape (1,024 by default); the verifier sees ever-new shapes (window
# × prompt × prefix lengths) and thrashes the default, so a bigger cache buys compute for some resident memory
# (docs/decisions/onednn-kernel-cache.md). oneDNN reads it when it first creates a kernel, so setting it on import
# of this package (before any model runs) takes effect; the environment wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "4096")
