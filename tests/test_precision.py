"""The precision a recognizer runs at, resolved on the machine that runs it (``streaming.precision``, issue 64).

On this CPU as it is, and in fresh interpreters capped as an AVX2-only CPU (``streaming.precision.AVX2_MACHINE``: each
kernel library reads its cap once, at start-up, hence the subprocess), where bf16 is emulated and several times
slower than fp32: there a bf16 name must give fp32, "auto" int8 on the encoder, and the weights ``load_tuned``
returns must hold no bf16 layer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO


def _in_fresh_interpreter(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=600)


def test_the_resolver_agrees_with_this_cpu_and_with_torch():
    import torch

    from streaming.precision import AUTO, BF16_FLAGS, cpu_info, machine_info, resolve_precision

    cpu = cpu_info()
    assert cpu["model"] and set(cpu["flags"]) <= {"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile",
                                                  "amx_bf16", "amx_int8"}
    auto = resolve_precision("auto")
    # native needs both the CPU's bf16 dot products and oneDNN willing to run bf16 (which it is not where capped)
    expected = bool(set(BF16_FLAGS) & set(cpu["flags"])) and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    if cpu["onednn_max_cpu_isa"] is None:
        assert auto.native_bf16 == expected
    assert auto.native_bf16 == machine_info()["native_bf16"]
    assert auto.effective == AUTO[auto.native_bf16] and auto.reason
    assert AUTO == {True: "bf16-all", False: "int8-encoder"}  # the adopted values (docs/decisions/precision-per-cpu.md)
    assert resolve_precision("bf16-encoder").effective == ("bf16-encoder" if auto.native_bf16 else "fp32")
    for kept in ("int8-encoder", "int8-all", "fp32"):
        assert resolve_precision(kept).effective == kept
    assert resolve_precision(None).effective == "fp32" and resolve_precision(None).lowering is None
    info = machine_info()
    assert info["cpu_model"] == cpu["model"] and info["torch"] == torch.__version__ and info["torch_threads"] >= 1


# which caps keep bf16 native, by the CPU's best bf16 path: an AMX CPU capped below AMX runs oneDNN's AVX512-BF16
# kernels, measured slower than fp32 there; a CPU whose best is AVX512-BF16 keeps them down to AVX512_CORE_BF16
# (docs/decisions/precision-per-cpu.md)
NATIVE_UNDER_CAP = {"amx_bf16": {"AVX2": False, "AVX512_CORE_VNNI": False, "avx512_core_bf16": False,
                                 "AVX512_CORE_AMX": True, "AVX10_1_512_AMX": True, "ALL": True},
                    "avx512_bf16": {"AVX2": False, "AVX512_CORE_VNNI": False, "avx512_core_bf16": True,
                                    "AVX512_CORE_AMX": True, "AVX10_1_512_AMX": True, "ALL": True}}


@pytest.mark.parametrize("cap", ["AVX2", "AVX512_CORE_VNNI", "avx512_core_bf16", "AVX512_CORE_AMX", "AVX10_1_512_AMX",
                                 "ALL"])
def test_a_onednn_cap_below_the_cpus_bf16_path_means_no_native_bf16(cap, monkeypatch):
    """The cap as read from the environment (this process's oneDNN itself was not capped: the subprocess test below
    checks what a capped one does); on a CPU without bf16 dot products no cap makes bf16 native."""
    import torch

    from streaming.precision import cpu_info, resolve_precision

    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    resolved = resolve_precision("bf16-all")
    assert resolved.cpu["onednn_max_cpu_isa"] == cap
    best = next((f for f in NATIVE_UNDER_CAP if f in cpu_info()["flags"]), None)
    native = best is not None and NATIVE_UNDER_CAP[best][cap]
    assert resolved.native_bf16 == (native and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if not native:
        assert resolved.effective == "fp32" and cap in resolved.reason and "bf16" in resolved.reason
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", cap)  # oneDNN's older name for the same cap
    assert resolve_precision("bf16-all").native_bf16 == resolved.native_bf16


def test_on_an_avx2_cpu_bf16_gives_fp32_and_auto_int8_on_the_encoder():
    code = """
import json, logging, torch
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
from streaming.precision import resolve_precision
from streaming.precision import native_bf16
from streaming.quantize import BF16Linear
from training.causal.evaluate import load_tuned
out = {p or "none": resolve_precision(p).as_dict() for p in ("auto", "bf16-all", "int8-encoder", "fp32", None)}
model = load_tuned("tiny.en", None, precision="auto")
out["layers"] = {"bf16": sum(isinstance(m, BF16Linear) for m in model.modules()),
                 "int8": sum(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in model.encoder.modules()),
                 "linear": sum(isinstance(m, torch.nn.Linear) for m in model.modules())}
out["aten"] = torch.backends.cpu.get_cpu_capability()
out["torch_bf16"] = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
out["bf16_native"] = native_bf16()
print(json.dumps(out))
"""
    from streaming.precision import AVX2_MACHINE

    if not {"avx2", "fma"} <= set(open("/proc/cpuinfo").read().split()):
        pytest.skip("this CPU cannot run AVX2 kernels")
    proc = _in_fresh_interpreter(code, **AVX2_MACHINE)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["torch_bf16"] and not out["bf16_native"]  # oneDNN itself runs no bf16 there
    assert out["aten"] == "AVX2"
    auto, bf16 = out["auto"], out["bf16-all"]
    assert auto["effective"] == "int8-encoder" and not auto["native_bf16"]
    assert auto["cpu"]["onednn_max_cpu_isa"] == "AVX2" and "no native bf16" in auto["reason"]
    assert bf16["effective"] == "fp32" and "no native bf16" in bf16["reason"] and "AVX2" in bf16["reason"]
    assert out["int8-encoder"]["effective"] == "int8-encoder"
    assert out["fp32"]["effective"] == "fp32" and out["none"]["effective"] == "fp32"
    # tiny.en: the encoder's 4 x 6 Linear layers int8, the decoder's 4 x 10 left in fp32, none bf16
    assert out["layers"] == {"bf16": 0, "int8": 4 * 6, "linear": 4 * 10}
    # said once, at INFO, by the process that chose it
    said = "whisperline.precision precision auto -> int8-encoder: no native bf16"
    assert proc.stderr.count(said) == 1, proc.stderr[-2000:]


def test_the_pipeline_and_the_server_default_to_auto_resolved_where_they_run():
    from configs.pipeline import PipelineConfig
    from recognizer.spec import served
    from serving.settings import ServeSettings

    assert served(PipelineConfig()).weights.precision == "auto"
    assert ServeSettings("sqlite:///x.db", "m").precision is None  # the version's own precision


def test_a_bad_precision_is_refused_before_any_work():
    from typer.testing import CliRunner

    from flows.cli import app
    from streaming.precision import resolve_precision
    from streaming.quantize import lower_precision
    from training.causal.evaluate import load_tuned

    for bad in ("fp16-all", "bf16", "AUTO", ""):
        with pytest.raises(ValueError, match="precision must be one of"):
            resolve_precision(bad)
    with pytest.raises(ValueError, match="precision must be one of"):
        load_tuned("tiny.en", None, precision="bf16_all")  # before the weights are read
    import torch

    with pytest.raises(ValueError, match="precision must be one of"):
        lower_precision(torch.nn.Module(), "fp16-all")
    assert lower_precision(torch.nn.Module(), "fp32") == 0
    result = CliRunner().invoke(app, ["serve-model", "--precision", "fp16-all"])
    assert result.exit_code == 2 and "fp16-all" in result.output and "auto" in result.output, result.output


@pytest.mark.slow
def test_the_server_precision_overrides_a_registered_recognizers(tmp_path, caplog):
    """A registered recognizer naming bf16 served with ``precision="int8-encoder"``: its spec's precision is
    replaced before its weights load (int8 encoder layers); without one it runs its own, resolved here."""
    import torch

    from conftest import original_weights_adapter
    from recognizer.registry import register_recognizer
    from recognizer.spec import RecognizerSpec, Weights
    from serving.models import load, resolve
    from streaming.precision import resolve_precision
    from streaming.quantize import BF16Linear
    from data.tracking import client

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    adapter = original_weights_adapter(tmp_path / "adapter", 1000)
    reg = register_recognizer(uri, RecognizerSpec("causal", "causal", 1000,
                                                  Weights("tiny.en", str(adapter), precision="bf16-all")))
    client(uri).set_registered_model_alias(reg["registered_model"], "champion", reg["version"])
    version = resolve(uri, reg["registered_model"], "champion")

    def layers(served) -> dict[str, int]:
        """The encoder Linear layers of the weights the recognizer's engines share, by kind."""
        (model,) = served.python_model.models._cache.values()
        modules = list(model.encoder.modules())
        return {"int8": sum(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in modules),
                "bf16": sum(isinstance(m, BF16Linear) for m in modules),
                "fp32": sum(isinstance(m, torch.nn.Linear) for m in modules)}

    with caplog.at_level("INFO", logger="whisperline.serving"):
        over = load(uri, version, "int8-encoder")
    # warmed up before it is served: FBGEMM's first int8 calls are slow (serving.models.ServedModel.warm_up)
    assert f"version {version.version} warmed up at int8-encoder" in caplog.text
    assert over.python_model.spec.weights.precision == "int8-encoder"
    assert layers(over) == {"int8": 4 * 6, "bf16": 0, "fp32": 0}
    described = over.describe()
    assert described["precision"] == "int8-encoder" and described["precision_requested"] == "int8-encoder"
    assert described["cpu"]["model"] and "precision_reason" in described
    assert over.engine() is not None  # engines build from the overridden spec

    own = load(uri, version)  # the version's own: bf16 where this CPU has it natively, else fp32
    native = resolve_precision("bf16-all").native_bf16
    assert own.python_model.spec.weights.precision == "bf16-all" and own.describe()["precision_requested"] == "bf16-all"
    assert own.precision == ("bf16-all" if native else "fp32")
    assert layers(own) == ({"int8": 0, "bf16": 4 * 6, "fp32": 0} if native else {"int8": 0, "bf16": 0, "fp32": 4 * 6})
