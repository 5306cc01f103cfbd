"""The numerical equivalence tests again under every CPU kernel path this machine can emulate (issue 14).

Which SIMD path ATen, oneDNN and MKL take depends on the CPU a test lands on; results that agree only bit for bit
on one of them are not portable. Each case re-runs the streaming-vs-full encoder tests and the batched-decoder
test in a fresh interpreter with the dispatch capped by environment variables (they are read once, at start-up,
hence the subprocess), so a tolerance that holds on one path only fails here, on any machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

from streaming.precision import AVX2_MACHINE

PATHS = {
    "aten-default": {"ATEN_CPU_CAPABILITY": "default"},  # scalar ATen kernels
    "avx2": AVX2_MACHINE,  # what an AVX2-only CPU runs: every kernel library capped at AVX2 at once
    "aten-avx512": {"ATEN_CPU_CAPABILITY": "avx512"},
}
# ATen obeys ATEN_CPU_CAPABILITY without asking the CPU: forcing "avx512" where the CPU lacks it runs AVX-512
# instructions and the interpreter dies of SIGILL (seen on an AMD EPYC with AVX2 only). These are the CPU flags
# torch's own AVX-512 detection requires; a path whose flags this CPU lacks cannot be emulated here.
NEEDS = {
    "avx2": {"avx2", "fma"},
    "aten-avx512": {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"},
}


def skip_reason(name: str) -> str | None:
    """Why ``name`` is not run here, or None: a path whose CPU flags this CPU lacks cannot be emulated, and a path
    that only sets ATen's capability to the one this machine picks by itself is the suite's own run already."""
    import torch

    if missing := NEEDS.get(name, set()) - cpu_flags():
        return f"this CPU lacks {sorted(missing)}: the {name} kernels cannot run here"
    if set(PATHS[name]) == {"ATEN_CPU_CAPABILITY"} and (
            PATHS[name]["ATEN_CPU_CAPABILITY"] == torch.backends.cpu.get_cpu_capability().lower()):
        return f"{name} is this machine's own kernel path: the suite's run of these tests covers it"
    return None


def cpu_flags() -> set[str]:
    try:
        text = open("/proc/cpuinfo", encoding="utf-8").read()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()
SELECTED = [
    "tests/test_causal_encoder.py::test_streaming_equals_full_masked_forward",
    "tests/test_causal_encoder.py::test_streaming_exact_with_two_threads",
    "tests/test_causal_encoder.py::test_stream_irregular_mel_feeds",
    "tests/test_causal_encoder.py::test_lora_layers_are_used",
    "tests/test_causal_encoder.py::test_fast_mode_and_batched_forward",
    "tests/test_causal_encoder.py::test_tolerance_catches_bugs",
    "tests/test_finetune_units.py::test_batched_decoder_equals_whisper_on_truncated_audio",
]


@pytest.fixture(scope="module")
def path_runs(realspeech, tmp_path_factory) -> dict[str, tuple[int, str, str]]:
    """Every path this CPU can emulate but its own, run at once: each is a fresh interpreter, mostly loading and waiting, so
    started together they take about half the wall time of one after another on two cores.
    {name: (return code, output, the ATen capability it ran with)}."""
    out = tmp_path_factory.mktemp("kernel-paths")
    running = {}
    for name in sorted(PATHS):
        if skip_reason(name):
            continue
        env = {**os.environ, **PATHS[name], "WHISPERLINE_REALSPEECH": str(realspeech)}
        log = open(out / f"{name}.log", "w+")  # a file, not a pipe: children cannot fill a pipe and stall
        running[name] = (subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o",
                                           "addopts=", *SELECTED], cwd=REPO, env=env, stdout=log,
                                          stderr=subprocess.STDOUT, text=True), log, env)
    done = {}
    for name, (proc, log, env) in running.items():
        code = proc.wait(timeout=900)
        log.seek(0)
        probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
        capability = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                    timeout=120).stdout.strip()
        done[name] = (code, log.read(), capability)
        log.close()
    return done


@pytest.mark.parametrize("name", sorted(PATHS))
def test_numerical_tests_pass_under_kernel_path(name, path_runs):
    if reason := skip_reason(name):
        pytest.skip(reason)
    code, output, capability = path_runs[name]
    assert code == 0, f"{name} (ATen capability {capability}):\n{output[-6000:]}"
    assert " passed" in output and "skipped" not in output
