#!/usr/bin/env bash
# Create or refresh the project environment. Idempotent: a second run only checks.
# Needs: python3 >= 3.11, pip reaching PyPI, and (for espeak-ng) apt as root or sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: espeak-ng (the synthetic corpus), postgresql (the tests' MLflow backend store, next to sqlite),
# chromium (the browser page's test)
missing=()
{ command -v espeak-ng >/dev/null 2>&1 && ldconfig -p | grep -q libespeak-ng; } || missing+=(espeak-ng libespeak-ng1)
{ command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; } || missing+=(postgresql)
# chromium + its WebDriver: the live page's headless browser test (tests/test_serve_model.py)
{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || missing+=(chromium chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing ${missing[*]} (Debian)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
"$PY" -c 'import sys; assert sys.version_info >= (3, 11), "whisperline needs Python >= 3.11"'
[ -x .venv/bin/python ] || "$PY" -m venv .venv

stamp=.venv/.installed-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  # uv (from PyPI, into the venv) installs the ~250 packages in seconds where pip takes minutes; pip is the
  # fallback. uv does not read pip's config: the machine's find-links (where the CPU torch wheel lies) is passed on.
  if .venv/bin/pip install -q "uv>=0.5,<1" 2>/dev/null; then
    links=$(.venv/bin/pip config get global.find-links 2>/dev/null || true)
    install() { .venv/bin/uv pip install -q --python .venv/bin/python ${links:+--find-links "$links"} "$@"; }
  else
    install() { .venv/bin/pip install -q "$@"; }
  fi
  # torch first: on this machine kind `torch==2.13.0` resolves to the CPU wheel on disk; an
  # unpinned torch would pull several GB of CUDA packages.
  install "torch==2.13.0"
  install -e ".[dev]"
  # simuleval (the latency metrics' reference implementation, used by tests to cross-check ours)
  # pins tqdm==4.64.1 and a source-only bitarray: install it without its pins, plus what its
  # scorers import.
  install --no-deps "simuleval==1.1.4" "TextGrid==1.6.1"
  # the real streaming peers (pyproject extra "peers"), without whisperlivekit's server/torchaudio dependencies
  # (+ python-multipart: whisperlivekit-server's form route, for the serving benchmark's side-by-side run)
  install --no-deps "whisperlivekit==0.2.26" "librosa==0.11.0" "lazy-loader==0.6" "pooch==1.9.0" "decorator==5.3.1" \
    "python-multipart==0.0.20"
  install "sacrebleu==2.6.0"
  # Bytecode for every installed module, once. uv leaves compilation to the first import, and where Python may not
  # write bytecode (PYTHONDONTWRITEBYTECODE=1, set on this machine kind) every process compiled torch, transformers
  # and sympy from source again: `import peft` took 14.5 s instead of 6.5 s, `import torch` 4.9 s instead of 1.8 s,
  # in each Ray Train worker, CLI run and server replica. Files some packages ship that are not Python 3 (test data)
  # fail to compile and are skipped: the step only saves time, it cannot break an import.
  .venv/bin/python -m compileall -q -j 0 .venv/lib/python3*/site-packages >/dev/null 2>&1 || true
  rm -f .venv/.installed-*
  touch "$stamp"
fi
echo "[setup] environment ready: .venv ($(.venv/bin/python -c 'import torch, whisper; print("torch", torch.__version__)'))"
