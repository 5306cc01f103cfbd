"""An upload bomb for the serving tests and ``benchmarks.serve_abuse``: little FLAC, hours of audio."""

from __future__ import annotations


def silent_flac(seconds: float, rate: int = 48000, channels: int = 2) -> bytes:
    """FLAC of ``seconds`` of silence, written a minute at a time: hours of it compress to ~1.4 MB (an upload bomb)."""
    import io

    import numpy as np
    import soundfile as sf

    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", rate, channels, format="FLAC", subtype="PCM_16") as f:
        block = np.zeros((rate * 60, channels), dtype=np.int16)
        left = int(seconds * rate)
        while left:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n
    return buf.getvalue()
