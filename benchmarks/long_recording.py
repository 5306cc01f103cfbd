"""A worker's memory for one long recording: a 4-hour 44.1 kHz stereo file through the prepare stage's loader.

    python benchmarks/long_recording.py [--hours 4] [--workdir DIR]   # → dataset_scale.json: worker_rss_mb_4h_recording

The file (FLAC, 16-bit: a 440 Hz tone under noise, so it is not all silence) is written in blocks, then loaded in a
fresh process by ``data.audio.load_audio`` exactly as ``data.stages.prepare`` loads a long-form input (the whole
recording, 16 kHz mono out) and encoded as prepare stores it; that process's peak RSS is the number (issue 30:
≤ 1.5 GB). The decode is block-wise (``data.audio._decode_blocks``); a whole-file float32 decode of the same file
alone would need 4.7 GB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.common import RESULTS  # noqa: E402

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from data.audio import encode_audio, load_audio
t0 = time.perf_counter()
audio = load_audio({path!r}, max_duration_s={max_s})
blob = encode_audio(audio.samples, "flac")
print(json.dumps({{"seconds": len(audio.samples) / 16000, "notes": audio.notes, "flac_mb": len(blob) / 2**20,
                  "wall_s": time.perf_counter() - t0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def write_recording(path: Path, hours: float, rate: int = 44100) -> None:
    import numpy as np
    import soundfile as sf

    rng = np.random.default_rng(0)
    t = np.arange(rate * 60) / rate
    tone = 0.2 * np.sin(2 * np.pi * 440 * t)
    with sf.SoundFile(path, "w", rate, 2, format="FLAC", subtype="PCM_16") as f:
        for _ in range(int(hours * 60)):
            noise = 0.01 * rng.standard_normal((len(t), 2))
            f.write((np.stack([tone, tone], axis=1) + noise).astype(np.float32))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=4.0)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="long-recording-"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"recording-{args.hours:g}h-44k-stereo.flac"
    started = time.perf_counter()
    if not path.exists():
        write_recording(path, args.hours)
    written_s = time.perf_counter() - started
    code = CHILD.format(repo=str(REPO), path=str(path), max_s=args.hours * 3600 + 60)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    child = json.loads(out.stdout.strip().splitlines()[-1])
    row = {"hours": args.hours, "sample_rate": 44100, "channels": 2, "file_mb": round(path.stat().st_size / 2**20, 1),
           "write_s": round(written_s, 1), "load_and_encode_s": round(child["wall_s"], 1),
           "peak_rss_mb": round(child["peak_rss_mb"], 1), "notes": child["notes"],
           "whole_float32_decode_mb": round(args.hours * 3600 * 44100 * 2 * 4 / 2**20),
           "command": " ".join(["python", *sys.argv])}
    path_json = RESULTS / "dataset_scale.json"
    result = json.loads(path_json.read_text()) if path_json.exists() else {}
    result["worker_rss_mb_4h_recording"] = row["peak_rss_mb"] if args.hours == 4 else result.get(
        "worker_rss_mb_4h_recording")
    result["long_recording"] = row
    path_json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
