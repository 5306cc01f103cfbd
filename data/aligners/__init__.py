"""Forced aligners behind one interface (data.aligners.base.Aligner).

`get_aligner(name)` is the only constructor the rest of the project uses; `register_aligner`
adds one (a plugin, or a fault-injecting wrapper in tests) without touching this package.
"""

from __future__ import annotations

from collections.abc import Callable

from data.aligners.base import AlignItem, Aligner, check_spans
from data.aligners.mfa import MfaAligner
from data.aligners.pocketsphinx import PocketsphinxAligner
from data.aligners.whisper_dtw import WhisperDtwAligner

_REGISTRY: dict[str, Callable[..., Aligner]] = {"pocketsphinx": PocketsphinxAligner, "mfa": MfaAligner,
                                                "whisper": WhisperDtwAligner}
ALIGNERS = tuple(_REGISTRY)


def register_aligner(name: str, factory: Callable[..., Aligner]) -> None:
    _REGISTRY[name] = factory


def get_aligner(name: str, **options: object) -> Aligner:
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown aligner {name!r}; choose one of {', '.join(sorted(_REGISTRY))}") from None
    return factory(**options)


__all__ = ["ALIGNERS", "AlignItem", "Aligner", "check_spans", "get_aligner", "register_aligner"]
