"""Promotion of a sweep's best trial in the MLflow model registry, by aliases (stages are deprecated).

Rule: the lowest WER among the finished trials that pass the WER gate (WER ≤ reference WER + cap, default 5 points;
the reference is the sweep's offline WER, the parent run's ``offline_wer`` metric, else the best trial's WER) and
whose AL is not negative and within ``al_budget_ms`` (ties: lower AL). The gate comes first because a
hallucinating trial (many words, emitted early, AL < 0) would otherwise win any tight budget. The winner is
logged as a pyfunc model in its trial run, registered, and gets the alias ``challenger``. ``champion`` moves to it
only if it beats the current champion's WER on the same held-in evaluation (the ``eval_set`` tag: the evaluation
data's version ids, splits and limit); otherwise the gate refuses and says why. Every promotion writes tags on the
model version: metrics, dataset versions, evaluation set, rule, sweep run, who and when.

mlflow, the policy reader (torch) and the models-from-code file (its import runs ``set_model``) are imported where
they are used, so that the rule and a refused promotion stay light.
"""

from __future__ import annotations

import getpass
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from configs.emma import EmmaConfig
from data.tracking import client, log_pyfunc_model
from evaluation.metrics.gate import WER_CAP_POINTS, reference_wer, within_wer_cap
from training.emma.dashboard import OFFLINE_WER_METRIC, trial_rows

CHALLENGER, CHAMPION = "challenger", "champion"


class PromotionRefused(RuntimeError):
    """No trial satisfies the rule."""


def pick_best(rows: Sequence[dict[str, Any]], al_budget_ms: float | None, *, offline_wer: float | None = None,
              wer_cap: float = WER_CAP_POINTS) -> dict[str, Any]:
    """The rule's winner among ``rows`` (``wer``, ``al_ms``). The WER gate and the AL ≥ 0 check come first, so that
    the AL budget only ever compares trials whose AL is a lag (see ``training.emma.dashboard``: negative AL is
    flagged and excluded, not clamped, since clamping would make it the best AL)."""
    if not rows:
        raise PromotionRefused("no finished trial with WER and AL to promote (unfinished trials never are)")
    ref = reference_wer((r["wer"] for r in rows), offline_wer)
    gated = [r for r in rows if within_wer_cap(r["wer"], ref, wer_cap) and not r["al_ms"] < 0]
    if not gated:
        raise PromotionRefused(f"no trial passes the WER gate (WER ≤ {ref:.4f} + {wer_cap} with AL ≥ 0; "
                               f"best WER {min(r['wer'] for r in rows):.4f})")
    eligible = [r for r in gated if al_budget_ms is None or r["al_ms"] <= al_budget_ms]
    if not eligible:
        raise PromotionRefused(f"no trial within the WER gate has AL ≤ {al_budget_ms} ms (best AL among them: "
                               f"{min(r['al_ms'] for r in gated):.0f} ms)")
    return min(eligible, key=lambda r: (r["wer"], r["al_ms"]))


def promotion_rule(al_budget_ms: float | None, rows: Sequence[dict[str, Any]], offline_wer: float | None,
                   wer_cap: float = WER_CAP_POINTS) -> str:
    """The rule as written on the model version's tags (with the gate's reference WER and where it came from)."""
    ref = reference_wer((r["wer"] for r in rows), offline_wer)
    source = "offline" if offline_wer is not None else "best trial"
    return (f"lowest wer with al_ms <= {al_budget_ms} among trials with wer <= {ref:.4f} ({source}) + {wer_cap} "
            f"and al_ms >= 0")


def _signature():
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

    return ModelSignature(inputs=Schema([ColSpec("string", "audio_path")]),
                          outputs=Schema([ColSpec("string", "audio_path"), ColSpec("string", "text"),
                                          ColSpec("double", "t_emma")]),
                          params=ParamSchema([ParamSpec("t_emma", "double", 0.0), ParamSpec("max_stall", "long", 0)]))


def register_trial(tracking_uri: str, run_id: str, registered_name: str) -> str:
    """Log the trial's policy as a pyfunc streaming model in its run and register it; returns the version."""
    from training.emma import pyfunc_model  # lazy: its import runs set_model
    from training.emma.artifact import read_policy_meta  # lazy: torch, see the module docstring

    run = client(tracking_uri).get_run(run_id)
    policy_dir = run.data.tags["policy_dir"]
    cfg = EmmaConfig.model_validate(read_policy_meta(policy_dir)["config"])
    artifacts = {"policy": policy_dir}
    if cfg.encoder == "causal_lora" and cfg.adapter_dir:
        artifacts["adapter"] = cfg.adapter_dir
    params = run.data.params
    _, version = log_pyfunc_model(tracking_uri, run_id, pyfunc_model.__file__, artifacts, registered_name,
                                  name="streaming_model", signature=_signature(),
                                  model_config={"t_emma": float(params["t_emma"]), "max_stall": int(params["max_stall"])})
    assert version is not None
    return version


def promote(tracking_uri: str, parent_run_id: str, registered_name: str, al_budget_ms: float | None,
            user: str | None = None, wer_cap: float = WER_CAP_POINTS) -> dict[str, Any]:
    """Register the rule's winner as ``challenger``; move ``champion`` only if it is better. Returns the decision."""
    from mlflow.exceptions import MlflowException

    c = client(tracking_uri)
    parent = c.get_run(parent_run_id)
    parent_tags = parent.data.tags
    offline_wer = parent.data.metrics.get(OFFLINE_WER_METRIC)  # logged by the dashboard from its references
    rows = trial_rows(tracking_uri, parent_run_id, offline_wer=offline_wer, wer_cap=wer_cap)
    best = pick_best(rows, al_budget_ms, offline_wer=offline_wer, wer_cap=wer_cap)
    version = register_trial(tracking_uri, best["run_id"], registered_name)
    eval_set = parent_tags.get("eval_set", "")
    tags = {"wer": best["wer"], "arwer": best.get("arwer"), "al_ms": best["al_ms"], "laal_ms": best.get("laal_ms"),
            "t_emma": best.get("t_emma"), "lambda_latency": best.get("lambda_latency"),
            "lambda_variance": best.get("lambda_variance"), "eval_set": eval_set,
            "dataset_versions": parent_tags.get("dataset_versions", ""), "sweep_run_id": parent_run_id,
            "trial_run_id": best["run_id"], "rule": promotion_rule(al_budget_ms, rows, offline_wer, wer_cap),
            "promoted_by": user or getpass.getuser(), "promoted_at": datetime.now(UTC).isoformat(timespec="seconds")}
    for k, v in tags.items():
        c.set_model_version_tag(registered_name, version, k, str(v))
    c.set_registered_model_alias(registered_name, CHALLENGER, version)
    try:
        champion = c.get_model_version_by_alias(registered_name, CHAMPION)
    except MlflowException:
        champion = None
    if champion is None:
        decision, moved = "champion: no champion yet", True
    elif champion.tags.get("eval_set") != eval_set:
        decision, moved = (f"refused: champion v{champion.version} was evaluated on "
                           f"{champion.tags.get('eval_set')!r}, challenger on {eval_set!r}"), False
    elif best["wer"] < float(champion.tags["wer"]):
        decision, moved = f"champion: WER {best['wer']:.4f} < champion v{champion.version} {champion.tags['wer']}", True
    else:
        decision, moved = (f"refused: WER {best['wer']:.4f} does not beat champion v{champion.version} "
                           f"({float(champion.tags['wer']):.4f})"), False
    if moved:
        c.set_registered_model_alias(registered_name, CHAMPION, version)
    c.set_model_version_tag(registered_name, version, "gate", decision)
    return {"registered_model": registered_name, "version": version, "decision": decision, "champion_moved": moved,
            "champion_version": version if moved else (champion.version if champion else None),
            "trial": {k: best.get(k) for k in ("run_id", "t_emma", "lambda_latency", "lambda_variance", "wer",
                                               "arwer", "al_ms")}}
