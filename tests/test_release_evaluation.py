"""The release's test rows (``benchmarks.evaluation.release_specs``) are fixed by the served spec and
``choices.json`` alone: faster-whisper offline, the served spec over the trained adapter and its causal pass alone,
the synthetic-only recipe's causal pass once its adapter is trained, and each peer policy's dev-chosen configuration
at the budgets asked for; the reference is LocalAgreement-2 at 1 s."""

from __future__ import annotations

from benchmarks.evaluation import _train_sets, release_specs, training_record
from evaluation.headline import CAUSAL_ROW, OFFLINE, SERVED_ROW, SYNTHETIC_CAUSAL_ROW
from recognizer.spec import load

STATE = {"artifacts": {"adapter": {"adapter_dir": "/a/300ms"}}}
CHOICES = {"peers": {f"{k}@{c}": {"kind": k, "chunk_ms": c, "vac": c == 500, "name": f"{k} {c}"}
                     for k in ("whisperlivekit-la", "whisperlivekit-simul") for c in (300, 500, 1000)}}


def test_the_release_scores_the_served_spec_the_offline_reference_and_the_chosen_peers():
    specs, reference = release_specs(STATE, CHOICES, budgets=(300, 1000))
    assert reference == "whisperlivekit-la 1000"
    assert [s.name for s in specs] == [OFFLINE, SERVED_ROW, CAUSAL_ROW, "whisperlivekit-la 300", "whisperlivekit-la 1000",
                                       "whisperlivekit-simul 300", "whisperlivekit-simul 1000"]
    served = specs[1]
    assert served.weights.adapter_dir == "/a/300ms"
    assert served.with_(name="x", weights={"adapter_dir": None}) == load(name="x")  # the served spec, unchanged
    causal = specs[2]  # the served spec's causal pass: same weights and causal options, no second pass
    assert causal.kind == "causal" and (causal.weights, causal.causal) == (served.weights, served.causal)


def test_a_part_of_peers_alone_needs_no_trained_adapter():
    specs, reference = release_specs({}, CHOICES, budgets=(500,), ours_rows=False, policies=("whisperlivekit-la",))
    assert [(s.name, s.peer.vac) for s in specs] == [("whisperlivekit-la 500", True)]
    assert reference == "whisperlivekit-la 1000"  # named even where this part does not score it


def test_the_synthetic_only_recipe_adds_its_causal_pass_once_trained():
    state = {"artifacts": {**STATE["artifacts"], "adapter_synthetic": {"adapter_dir": "/a/synthetic"}}}
    specs, _ = release_specs(state, CHOICES, budgets=())
    assert [s.name for s in specs] == [OFFLINE, SERVED_ROW, CAUSAL_ROW, SYNTHETIC_CAUSAL_ROW]
    synthetic, causal = specs[3], specs[2]  # the same causal pass, only the adapter differs
    assert synthetic.weights.adapter_dir == "/a/synthetic"
    assert synthetic.with_(name=CAUSAL_ROW, weights={"adapter_dir": "/a/300ms"}) == causal


def test_the_recipes_differ_only_by_the_real_speech():
    state = {"datasets": {"synth": "/d/s", "kokoro_train": "/d/k", "l2": "/d/l2", "real": "/d/r"}}
    assert _train_sets(state, "adopted") == ["/d/s", "/d/k", "/d/l2"]
    assert _train_sets(state, "synthetic") == ["/d/s", "/d/k"]


def test_an_adapter_trained_again_keeps_the_earlier_one_in_the_report():
    """A row added on a new machine runs on an adapter trained again (same recipe, new run key): the report's training
    section names the new one and keeps the earlier one, whose rows were scored with it."""
    before = {"artifacts": {"adapter": {"adapter_dir": "/a/old"}, "adapter_synthetic": {"adapter_dir": "/a/syn"}}}
    state = {"artifacts": {"adapter": {"adapter_dir": "/a/new"}}}
    record = training_record(before, state, ["/d/l2"])
    assert record["artifacts"] == {"adapter": {"adapter_dir": "/a/new"}, "adapter_synthetic": {"adapter_dir": "/a/syn"}}
    assert record["earlier_artifacts"] == [{"key": "adapter", "adapter_dir": "/a/old"}]
    assert training_record(record, state, ["/d/l2"])["earlier_artifacts"] == record["earlier_artifacts"]  # once
