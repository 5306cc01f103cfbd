#!/bin/bash
# The issue's newcomer check: a fresh clone, `make run`, `make serve-model`, each long-form recording streamed in real
# time over the WebSocket (`whisperline stream-file`), scored against the recording's reference beside offline
# faster-whisper's long-form transcript of the same recording (benchmarks/results/longform.json).
#   bash benchmarks/newcomer.sh [STATE]   → benchmarks/results/newcomer.json   (STATE: a benchmark data state.json)
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
STATE=${1:-$REPO/outputs/bench-evaluation/state.json}
WORK=${NEWCOMER_DIR:-/tmp/whisperline-newcomer}
LONGFORM=${LONGFORM_WAV:-$REPO/../shared/data/longform/wav}
rm -rf "$WORK" && git clone -q "$REPO" "$WORK" && cd "$WORK" || exit 1
COMMIT=$(git rev-parse --short HEAD)
T0=$(date +%s)
make run > "$WORK/run.log" 2>&1 || { echo "make run failed: $WORK/run.log"; exit 1; }
RUN_S=$(( $(date +%s) - T0 ))
make serve-model > "$WORK/serve.log" 2>&1 &
for _ in $(seq 1 150); do curl -sf http://127.0.0.1:8000/version > "$WORK/version.json" && break; sleep 2; done
for wav in "$LONGFORM"/*.wav; do
  .venv/bin/whisperline stream-file "$wav" > "$WORK/$(basename "$wav" .wav).stream.json" 2>>"$WORK/stream.err"
done
pkill -INT -f "whisperline serve-model"; sleep 5; .venv/bin/ray stop --force > /dev/null 2>&1
cd "$REPO" && .venv/bin/python - "$STATE" "$WORK" "$RUN_S" "$COMMIT" <<'PY'
import json, sys, time
from pathlib import Path
from evaluation.longform import whole_recordings
from evaluation.sets import load_split
from training.metrics import wer
state, work, run_s = json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]), int(sys.argv[3])
recordings = {r.utt_id: r for r in whole_recordings(load_split([state["datasets"]["longform"]], ["test"]))}
longform = json.loads(Path("benchmarks/results/longform.json").read_text())
fw = {u["utt_id"]: u["hyp"] for u in next(s for s in longform["systems"] if s["kind"] == "faster-whisper")["per_utterance"]}
refs, ours, theirs, rows = [], [], [], {}
for rid, rec in sorted(recordings.items()):
    text = (work / f"{rid}.stream.json").read_text()
    served = json.loads(text[text.index("{"):])["text"]
    refs.append(rec.reference); ours.append(served); theirs.append(fw[rid])
    rows[rid] = {"words": len(rec.reference.split()), "served_wer": round(wer([rec.reference], [served]), 4),
                 "faster_whisper_wer": round(wer([rec.reference], [fw[rid]]), 4), "served_text": served}
version = json.loads((work / "version.json").read_text())
result = {"commit": sys.argv[4], "date": time.strftime("%Y-%m-%d", time.gmtime()), "command": "bash benchmarks/newcomer.sh",
          "make_run_s": run_s, "served": {k: version.get(k) for k in ("registered_model", "version", "alias", "kind")},
          "recordings": rows, "served_wer": round(wer(refs, ours), 4), "faster_whisper_wer": round(wer(refs, theirs), 4)}
result["difference_points"] = round(100 * (result["served_wer"] - result["faster_whisper_wer"]), 2)
Path("benchmarks/results/newcomer.json").write_text(json.dumps(result, indent=1) + "\n")
print(json.dumps({k: v for k, v in result.items() if k != "recordings"}, indent=1))
PY
