"""Forced aligners behind one interface (data.aligners.base.Aligner).

`get_aligner(name)` is the only constructor the rest of the project uses.
"""

from __future__ import annotations

from data.aligners.base import AlignItem, Aligner, check_spans

ALIGNERS = ("pocketsphinx", "mfa", "whisper")


def get_aligner(name: str, **options: object) -> Aligner:
    if name == "pocketsphinx":
        from data.aligners.pocketsphinx import PocketsphinxAligner

        return PocketsphinxAligner(**options)  # type: ignore[arg-type]
    if name == "mfa":
        from data.aligners.mfa import MfaAligner

        return MfaAligner(**options)  # type: ignore[arg-type]
    if name == "whisper":
        from data.aligners.whisper_dtw import WhisperDtwAligner

        return WhisperDtwAligner(**options)  # type: ignore[arg-type]
    raise ValueError(f"unknown aligner {name!r}; choose one of {', '.join(ALIGNERS)}")


__all__ = ["ALIGNERS", "AlignItem", "Aligner", "check_spans", "get_aligner"]
