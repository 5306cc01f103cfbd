"""whisperlivekit's voice-activity controller in front of a peer adapter (evaluation.peers, `vac=True`).

whisperlivekit's server runs Silero VAD (the ONNX model shipped in the package) over the incoming audio in 40 ms
pieces and hands its ASR only speech, with a silence event at each speech end and start. This class reproduces that
segmentation, piece by piece, so the peers' VAC configuration is the server's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streaming.events import SAMPLE_RATE


class VoiceActivityController:
    """whisperlivekit's voice-activity controller, one per stream: where speech starts and ends in the samples fed.

    `split(samples)` returns the chunk's pieces in order: ("speech", array) and ("silence_start", None) /
    ("silence_end", seconds of silence) events, exactly how `AudioProcessor._process_pcm_array` cuts a chunk."""

    _session: Any = None  # the ONNX session is stateless and shared (whisperlivekit shares one per process too)

    def __init__(self) -> None:
        # lazy: whisperlivekit is the optional `peers` extra
        from whisperlivekit.silero_vad_iterator import FixedVADIterator, OnnxWrapper, load_onnx_session

        if VoiceActivityController._session is None:
            VoiceActivityController._session = load_onnx_session()
        self._vad = FixedVADIterator(OnnxWrapper(session=VoiceActivityController._session))
        self.in_silence = True  # a stream starts in silence until the first speech start (as the server does)
        self._silence_from = 0
        self._samples = 0

    PIECE = int(0.04 * SAMPLE_RATE)  # the server's vac_chunk_size: the VAD sees 40 ms at a time

    def split(self, samples: np.ndarray) -> list[tuple[str, Any]]:
        """The server cuts at events clamped to the 40 ms piece they arrive in (a start is never moved before the
        piece), so the chunk is cut the same way, piece by piece; consecutive speech pieces are merged."""
        out: list[tuple[str, Any]] = []
        for i in range(0, samples.size, self.PIECE):
            for kind, value in self._split_piece(samples[i : i + self.PIECE]):
                if kind == "speech" and out and out[-1][0] == "speech":
                    out[-1] = ("speech", np.concatenate([out[-1][1], value]))
                else:
                    out.append((kind, value))
        return out

    def _split_piece(self, samples: np.ndarray) -> list[tuple[str, Any]]:
        start, end = self._samples, self._samples + samples.size
        out: list[tuple[str, Any]] = []
        last = 0
        for event in self._vad(samples) or []:
            if "start" in event and self.in_silence:
                at = max(start, min(end, int(event["start"])))
                out.append(("silence_end", (at - self._silence_from) / SAMPLE_RATE))
                self.in_silence, last = False, at - start
            if "end" in event and not self.in_silence:
                at = max(start, min(end, int(event["end"])))
                if at - start > last:
                    out.append(("speech", samples[last : at - start]))
                out.append(("silence_start", None))
                self.in_silence, self._silence_from, last = True, at, at - start
        if not self.in_silence and last < samples.size:
            out.append(("speech", samples[last:]))
        self._samples = end
        return out
