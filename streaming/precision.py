"""Which precision a recognizer's Linear layers run at on the machine that runs it (one resolver for every loader).

A recognizer spec names a precision (``recognizer.spec.Weights.precision``: ``"bf16-all"``, ..., ``"auto"`` or ``"fp32"``).
bfloat16 only pays where oneDNN has native bf16 dot products (AMX tiles, or AVX512-BF16); elsewhere PyTorch emulates
it, several times slower than fp32, enough to put a streaming recognizer behind real time. So a bf16 name is a
preference, kept where bf16 is native and fp32 otherwise; ``"auto"`` is ``AUTO``'s choice for the path
(docs/decisions/precision-per-cpu.md); int8 and fp32 are kept as named (int8 dynamic quantization runs on AVX2 too).

The evaluate stage (``training.causal.evaluate.load_tuned``), a registered recognizer's pyfunc (which loads through
it) and the server (``serving.models``) all resolve here, so one machine gives one answer everywhere, and each
process logs what it chose once. This module reads the CPU and the environment only; torch is imported where its
own view of oneDNN is asked, so configs can name the strings without importing torch.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("whisperline.precision")

PRECISIONS = ("bf16-all", "bf16-encoder", "int8-encoder", "int8-all")  # what lowers Linear layers
REQUESTS = ("auto", "fp32", *PRECISIONS)  # what a spec, the pipeline config or `serve-model --precision` may name
ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
# the CPU flags that give oneDNN native bf16 dot products, best first, each with the lowest ONEDNN_MAX_CPU_ISA that
# keeps that path (docs/decisions/precision-per-cpu.md: bf16 against fp32 measured per path)
BF16_FLAGS = {"amx_bf16": "AVX512_CORE_AMX", "avx512_bf16": "AVX512_CORE_BF16"}
# what "auto" runs, by whether bf16 is native here (docs/decisions/precision-per-cpu.md)
AUTO = {True: "bf16-all", False: "int8-encoder"}
# What an AVX2-only CPU runs, emulated on a bigger one: each kernel library reads its own cap once, at start-up, so
# all four are set together in a fresh process. oneDNN alone is not enough: fp32 GEMMs go through MKL, int8 dynamic
# quantization through FBGEMM (both stay AVX-512 under a oneDNN cap), and ATen's vector kernels through
# ATEN_CPU_CAPABILITY.
AVX2_MACHINE = {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
                "ATEN_CPU_CAPABILITY": "avx2"}

# oneDNN's CPU ISA names in increasing order (the values of ONEDNN_MAX_CPU_ISA); the AVX10 names are aliases of the
# AVX512 ones. oneDNN dispatches bf16 dot products from AVX512_CORE_BF16 on (below it, bf16 is converted in software)
# and AMX tiles from AVX512_CORE_AMX on.
_ISA_ORDER = (("SSE41",), ("AVX",), ("AVX2",), ("AVX2_VNNI",), ("AVX2_VNNI_2",), ("AVX512_CORE",),
              ("AVX512_CORE_VNNI",), ("AVX512_CORE_BF16",), ("AVX10_1_512", "AVX512_CORE_FP16"),
              ("AVX10_1_512_AMX", "AVX512_CORE_AMX"), ("AVX10_1_512_AMX_FP16", "AVX512_CORE_AMX_FP16"),
              ("DEFAULT", "ALL"))
ISA_RANK = {name: rank for rank, names in enumerate(_ISA_ORDER) for name in names}


@dataclass(frozen=True)
class ResolvedPrecision:
    requested: str | None
    effective: str  # one of PRECISIONS, or "fp32"
    reason: str
    cpu: dict[str, Any] = field(compare=False)  # {model, flags, onednn_max_cpu_isa}
    native_bf16: bool

    @property
    def lowering(self) -> str | None:
        """What ``streaming.quantize.lower_precision`` applies: the effective precision, None for fp32."""
        return None if self.effective == "fp32" else self.effective

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str, tuple[str, ...]]:
    """(model name, the ISA flags of ``ISA_FLAGS`` it has) from /proc/cpuinfo; the CPU does not change in a process."""
    model, flags = "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:  # not Linux: no flags known, so no bf16 claimed
        pass
    return model or platform.processor() or platform.machine(), tuple(f for f in ISA_FLAGS if f in flags)


def onednn_cap() -> str | None:
    """The ISA oneDNN is capped at by the environment (``ONEDNN_MAX_CPU_ISA``, or its older name
    ``DNNL_MAX_CPU_ISA``, which oneDNN still reads), or None."""
    for var in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"):
        if value := os.environ.get(var, "").strip():
            return value
    return None


def cpu_info() -> dict[str, Any]:
    model, flags = _cpuinfo()
    return {"model": model, "flags": list(flags), "onednn_max_cpu_isa": onednn_cap()}


def _torch_bf16_supported() -> bool:
    """PyTorch's own view: oneDNN can run bf16 here. It says True from AVX512_CORE on, where oneDNN still emulates
    the dot products, so it is a necessary condition only; it does catch a cap this module cannot parse."""
    try:
        import torch

        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (ImportError, AttributeError, RuntimeError):
        return False


def _bf16_verdict(cpu: dict[str, Any]) -> tuple[bool, str]:
    """(native bf16?, why not — or which dot products are used)."""
    where = f"{cpu['model']}, flags {' '.join(cpu['flags']) or 'none known'}"
    have = [f for f in BF16_FLAGS if f in cpu["flags"]]
    if not have:
        return False, f"no native bf16 (AMX or AVX512-BF16) on this CPU ({where}): bf16 is slower than fp32 here"
    cap = cpu["onednn_max_cpu_isa"]
    # the CPU's own best path decides: an AMX CPU capped below AMX runs oneDNN's AVX512-BF16 kernels, which were slower
    # than fp32 there, while on a CPU whose best is AVX512-BF16 they were faster (the decision record)
    need = BF16_FLAGS[have[0]]
    if cap is not None and ISA_RANK.get(cap.upper(), ISA_RANK["ALL"]) < ISA_RANK[need]:
        return False, (f"no native bf16: oneDNN is capped at {cap} by the environment, below {need} "
                       f"({where}): emulated bf16 is slower than fp32")
    if not _torch_bf16_supported():
        return False, f"no native bf16: PyTorch's oneDNN does not run bf16 here ({where})"
    return True, f"native bf16 ({'/'.join(have)}) on this CPU ({cpu['model']})"


def native_bf16() -> bool:
    """Whether bf16 Linear layers run on native bf16 dot products here (AMX or AVX512-BF16, not capped away)."""
    return _bf16_verdict(cpu_info())[0]


_logged: set[tuple[str | None, str]] = set()


def resolve_precision(requested: str | None) -> ResolvedPrecision:
    """The precision to run ``requested`` at on this machine (rules in the module docstring); refuses an unknown
    name. Each distinct resolution is logged once per process."""
    if requested is not None and requested not in REQUESTS:
        raise ValueError(f"precision must be one of {REQUESTS} or None (fp32), got {requested!r}")
    cpu = cpu_info()
    native, why = _bf16_verdict(cpu)
    if requested is None or requested == "fp32":
        effective, reason = "fp32", "fp32 as named" if requested else "no precision named: fp32"
    elif requested.startswith("int8-"):
        effective, reason = requested, "int8 as named"
    elif requested == "auto":
        effective, reason = AUTO[native], why if native else f"{why}; auto runs {AUTO[native]} on such a CPU"
    else:  # a bf16 name: a preference
        effective, reason = (requested, why) if native else ("fp32", why)
    resolved = ResolvedPrecision(requested, effective, reason, cpu, native)
    if requested is not None and (requested, effective) not in _logged:
        _logged.add((requested, effective))
        log.info("precision %s -> %s: %s", requested, effective, reason)
    return resolved


def machine_info() -> dict[str, Any]:
    """What a speed result depends on: the CPU, its ISA flags, the oneDNN cap, native bf16, torch and its threads."""
    cpu = cpu_info()
    try:
        import torch

        torch_version, threads = torch.__version__, torch.get_num_threads()
        aten = torch.backends.cpu.get_cpu_capability()
    except ImportError:
        torch_version, threads, aten = None, None, None
    return {"cpu_model": cpu["model"], "isa_flags": cpu["flags"], "onednn_max_cpu_isa": cpu["onednn_max_cpu_isa"],
            "isa_caps": {k: os.environ[k] for k in AVX2_MACHINE if os.environ.get(k)}, "aten_cpu_capability": aten,
            "native_bf16": native_bf16(), "torch": torch_version, "torch_threads": threads,
            "python": sys.version.split()[0]}


__all__ = ["AUTO", "AVX2_MACHINE", "BF16_FLAGS", "ISA_FLAGS", "PRECISIONS", "REQUESTS", "ResolvedPrecision",
           "cpu_info", "machine_info", "native_bf16", "onednn_cap", "resolve_precision"]
