"""The streaming package raises oneDNN's kernel cache to 4,096 (streaming/__init__.py): a kernel made for a shape
is still cached after 1,200 other shapes, where oneDNN's default of 1,024 has evicted it (the control)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

SHAPES = """
import streaming  # sets the capacity before the first kernel is made
import torch
import torch.nn.functional as F
w = torch.randn(64, 64, dtype=torch.bfloat16)
for n in range(2, 1202):  # 1,200 distinct matmul shapes (one row takes another path), the first again
    F.linear(torch.randn(n, 64, dtype=torch.bfloat16), w)
F.linear(torch.randn(2, 64, dtype=torch.bfloat16), w)
"""


def last_matmul_creation(env_capacity: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    env["ONEDNN_VERBOSE"] = "profile_create"
    if env_capacity:
        env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = env_capacity
    out = subprocess.run([sys.executable, "-c", SHAPES], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout
    made = [next(f for f in line.split(",") if f.startswith("create:")) for line in out.splitlines()
            if ",create:" in line and ",matmul," in line]
    if len(made) < 1201:
        pytest.skip("bf16 matmuls do not go through oneDNN on this CPU: no kernel cache to size")
    return made[-1]


def test_a_kernel_stays_cached_past_the_default_capacity():
    assert last_matmul_creation(None) == "create:cache_hit"
    assert last_matmul_creation("1024") == "create:cache_miss"  # the environment wins; the default evicts it
