#!/bin/bash
# The newcomer's path (issue 64), as a new team takes it: a fresh clone, `make run` RUNS times from nothing (the
# champion each run promotes: the verdict must not change), then the last run's champion
#   - scored by the evaluate stage on real speech the pipeline never saw (REALSPEECH, every utterance held out) beside
#     the peers: `whisperline evaluate --model models:/whisperline-recognizer-tiny.en@champion --peers`;
#   - served by `make serve-model` and sent a long-form recording in real time (`whisperline stream-file`), once on
#     this CPU's own kernels and once with oneDNN capped at AVX2 (a CPU without native bf16).
#   bash benchmarks/newcomer.sh   → benchmarks/results/newcomer.{json,md}
# Knobs: RUNS (3), NEWCOMER_DIR, REALSPEECH (../shared/data/realspeech), LONGFORM_WAV (a recording; its reference is
# read from the folder's transcripts.tsv).
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${RUNS:-3}
WORK=${NEWCOMER_DIR:-/tmp/whisperline-newcomer}
REALSPEECH=$(cd "${REALSPEECH:-$REPO/../shared/data/realspeech}" && pwd)
LONGFORM_WAV=$(realpath "${LONGFORM_WAV:-$REPO/../shared/data/longform/wav/lj_LJ002-0021_to_0034.wav}")
rm -rf "$WORK" && git clone -q "$REPO" "$WORK" && cd "$WORK" || exit 1
COMMIT=$(git rev-parse --short HEAD)
mkdir -p "$WORK/newcomer"
OUT="$WORK/newcomer"
champion() {  # the version behind @champion: its spec name, kind and the gate's reason
  .venv/bin/python - <<'PY'
import json
from mlflow import MlflowClient
from training.tracking import default_tracking_uri
c = MlflowClient(default_tracking_uri())
v = c.get_model_version_by_alias("whisperline-recognizer-tiny.en", "champion")
run = c.get_run(v.run_id)
print(json.dumps({"version": v.version, "kind": v.tags.get("whisperline.kind"), "gate": v.tags.get("gate"),
                  "name": json.loads(run.data.tags.get("spec") or "{}").get("name"),
                  "dev_wer": v.tags.get("dev_wer"), "dev_repeated_words": v.tags.get("dev_repeated_words")}))
PY
}
for i in $(seq 1 "$RUNS"); do
  rm -rf outputs .prefect mlruns/mlflow.db mlruns/artifacts
  T0=$(date +%s)
  make run > "$OUT/run$i.log" 2>&1 || { echo "make run $i failed: $OUT/run$i.log"; exit 1; }
  echo "{\"run\": $i, \"seconds\": $(( $(date +%s) - T0 )), \"champion\": $(champion)}" >> "$OUT/runs.jsonl"
done
# real speech, every utterance held out (test), as a newcomer points the data build at it
printf 'dataset:\n  aligner: pocketsphinx\n  split_by: utterance\n  splits: {test: 1.0}\n' > "$OUT/heldout.yaml"
.venv/bin/whisperline data build "$REALSPEECH" --name newcomer-realspeech --config "$OUT/heldout.yaml" \
  --output-root "$OUT/datasets" > "$OUT/build.log" 2>&1 || { echo "build failed: $OUT/build.log"; exit 1; }
VERSION=$(ls -d "$OUT"/datasets/newcomer-realspeech/*/ | head -1)
.venv/bin/whisperline evaluate "$VERSION" --split test --model models:/whisperline-recognizer-tiny.en@champion \
  --peers --out "$OUT/eval-real" --purpose newcomer --ledger "$OUT/ledger.jsonl" > "$OUT/evaluate.log" 2>&1 \
  || { echo "evaluate failed: $OUT/evaluate.log"; exit 1; }
REF=$(awk -F'\t' -v id="$(basename "$LONGFORM_WAV" .wav)" '$1 == id {print $2}' "$(dirname "$LONGFORM_WAV")/../transcripts.tsv")
for path in native avx2; do
  env $([ $path = avx2 ] && echo ONEDNN_MAX_CPU_ISA=AVX2) make serve-model > "$OUT/serve-$path.log" 2>&1 &
  for _ in $(seq 1 150); do curl -sf http://127.0.0.1:8000/version > "$OUT/version-$path.json" && break; sleep 2; done
  .venv/bin/whisperline stream-file "$LONGFORM_WAV" --reference "$REF" > "$OUT/stream-$path.json" 2>>"$OUT/stream.err"
  pkill -INT -f "whisperline serve-model"; sleep 8; .venv/bin/ray stop --force > /dev/null 2>&1; sleep 2
done
cd "$REPO" && .venv/bin/python benchmarks/newcomer_report.py "$OUT" "$COMMIT" "$LONGFORM_WAV"
