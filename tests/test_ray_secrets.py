"""No secret travels in a Ray runtime environment (issue 30): Ray keeps it in its metadata and shows it on the
dashboard. The build's cluster connection passes only non-secret settings; the workers of a cluster this process
starts still see the credentials, from the environment they inherit (a real local Ray instance, in a subprocess so
that it is this connection's own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from data.distributed import worker_env

SECRETS = {"AWS_ACCESS_KEY_ID": "AKIATESTSECRETID0001", "AWS_SECRET_ACCESS_KEY": "s3cr3t/valu3+test",
           "AWS_SESSION_TOKEN": "sessiontoken-test-value", "WHISPERLINE_SERVE_TOKEN": "serve-token-test-value"}
PLAIN = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_DEFAULT_REGION": "us-east-1",
         "AWS_SHARED_CREDENTIALS_FILE": "/run/secrets/aws", "WHISPERLINE_CHAOS": "x"}


def test_worker_env_keeps_settings_and_drops_secrets():
    env = worker_env({**SECRETS, **PLAIN, "HOME": "/root"})
    assert env == PLAIN


def test_no_secret_in_the_runtime_env_and_workers_still_see_them():
    code = """
import json, os, ray
from data.distributed import connect
assert connect("local", 1)
@ray.remote
def seen():
    return {k: os.environ.get(k) for k in %r}
print(json.dumps({"runtime_env": ray.get_runtime_context().runtime_env, "worker": ray.get(seen.remote())}))
ray.shutdown()
""" % sorted(SECRETS)
    env = {**os.environ, **SECRETS, **PLAIN}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    text = json.dumps(result["runtime_env"])
    for value in SECRETS.values():
        assert value not in text, (value, text)
    assert result["runtime_env"].get("env_vars", {}).get("AWS_ENDPOINT_URL") == PLAIN["AWS_ENDPOINT_URL"]
    assert result["worker"] == SECRETS  # inherited by the workers of the cluster this process started
