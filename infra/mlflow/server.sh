#!/usr/bin/env bash
# MLflow tracking server: PostgreSQL backend + artifact store, bound to loopback unless MLFLOW_HOST says otherwise
# (put an authenticating proxy in front before exposing it).
#   MLFLOW_BACKEND_URI   default postgresql://mlflow@127.0.0.1:5432/mlflow (sqlite:///mlruns/mlflow.db works too)
#   MLFLOW_ARTIFACTS     default s3://whisperline-mlflow (a local folder works too)
set -euo pipefail
exec mlflow server \
  --host "${MLFLOW_HOST:-127.0.0.1}" --port "${MLFLOW_PORT:-5000}" --workers "${MLFLOW_WORKERS:-4}" \
  --backend-store-uri "${MLFLOW_BACKEND_URI:-postgresql://mlflow@127.0.0.1:5432/mlflow}" \
  --serve-artifacts --artifacts-destination "${MLFLOW_ARTIFACTS:-s3://whisperline-mlflow}"
