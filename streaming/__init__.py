"""Streaming recognition: the causal encoder (block mask, caches), streaming decoders, the engine and
the offline baseline, all behind `events.StreamingRecognizer`."""

import os

# oneDNN keeps the kernels it generated for each matmul / activation shape in a cache of 1,024 by default. A
# streaming verifier sees ever-new shapes (window length × prompt and prefix lengths): streaming the served two-pass
# spec over 4 min of real speech, 4,177 kernels were generated at the default size and 2,267 at 4,096 (the working
# set fits): 16 % less compute per step (mean 136 → 114 ms, p90 185 → 150 ms) for ~250 MB more resident memory
# per process (benchmarks/results/primitive_cache.md). Read by oneDNN when it first creates a kernel, so setting
# it on import of this package (before any model runs) takes effect; the environment wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "4096")
