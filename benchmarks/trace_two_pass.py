"""Trace the served two-pass recognizer on one *dev* utterance (real or synthetic) or continuous dev stream (a
speaker's dev utterances joined, ``benchmarks/dev_longform.py``'s streams): every verifier pass (its words, how many
of them are sure) and what each step shows (final count, partial words). For reading why words wait, on dev only:
the test split is refused.

    python benchmarks/trace_two_pass.py LJ001-0015 [--set verifier_restart_words=3 ...]
    python benchmarks/trace_two_pass.py LJ001-0001+15     # a dev stream, by its id

Fixed feeding (one chunk per step, no clock), so the trace does not depend on the machine's speed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from benchmarks.common import served_spec
    from benchmarks.longform import dev_streams
    from evaluation.sets import load_split
    from evaluation.systems import build

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("utt_id")
    parser.add_argument("--out", default="outputs/bench-evaluation", help="where benchmarks/evaluation.py built data")
    parser.add_argument("--set", action="append", default=[], help="FIELD=JSON over the served spec")
    args = parser.parse_args()
    state = json.loads((Path(args.out) / "state.json").read_text())
    sets = [state["datasets"][k] for k in ("real", "kokoro_dev") if k in state["datasets"]]
    dev = {u.utt_id: u for u in load_split(sets, ["dev"])}
    if "+" in args.utt_id:  # a stream's id: its first utterance + how many follow
        dev.update({u.utt_id: u for u in dev_streams(state)[0]})
    if args.utt_id not in dev:
        raise SystemExit(f"{args.utt_id} is not a dev utterance of {', '.join(sets)} (test is refused)")
    fields = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    segmented, _ = build(served_spec("trace", **fields))
    two_pass = segmented.inner
    segmented.reset()
    verify = two_pass._verify  # noqa: SLF001 (reading, not changing, what a pass found)

    def traced(tails, final):
        verify(tails, final)
        heard = two_pass._previous  # noqa: SLF001
        print(f"  pass at {two_pass._samples / 16:.0f} ms{' (final)' if final else ''}: "  # noqa: SLF001
              f"{len(two_pass.final_words)} final; heard {list(heard.words) if heard else []}, "
              f"sure {heard.confident(two_pass.partial_min_prob) if heard and two_pass.partial_min_prob else '-'}")

    two_pass._verify = traced  # noqa: SLF001
    audio, chunk = dev[args.utt_id].audio, two_pass.chunk_ms * 16
    for i in range(0, len(audio), chunk):
        hyp = segmented.feed(audio[i : i + chunk])
        print(f"{(i + chunk) / 16:.0f} ms: {len(hyp.committed)} final; shown {' '.join(hyp.tentative)!r}")
    print("final:", " ".join(segmented.finish().words))
    print("reference:", dev[args.utt_id].reference)


if __name__ == "__main__":
    main()
