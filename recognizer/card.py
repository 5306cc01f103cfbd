"""A registered version's model card: the MLflow model version's description (markdown, shown on its page in the
MLflow UI), written from what the registry already holds, so that it can never say other than the tags.

What it says: what the recognizer is (its spec in words), what trained it (dataset versions, base weights, commit),
how it scored on dev (selection) and test (report only) with intervals, pooled and per domain, its compute, the
gate's verdict, and the commands that serve and evaluate it. Written at registration (``register_recognizer``) and
refreshed whenever numbers are tagged (the gate's dev tags, the test tags), so it follows the tags.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from data.tracking import client
from recognizer.spec import RecognizerSpec, from_dict

DOMAIN_PREFIX = "_wer_"


def _spec_words(spec: RecognizerSpec) -> list[str]:
    w, sp = spec.weights, spec.second_pass
    adapter = ("a LoRA adapter (this version's `adapter` artifact, "
               f"{'merged into the weights' if w.merge_adapter else 'unmerged'})" if w.adapter_dir
               else "the original weights")
    if spec.decoding.emma_dir:
        policy = f"an EMMA read/write policy (threshold {spec.decoding.t_emma:g})"
    else:
        policy = "the stability rule, " + ("greedy" if spec.decoding.beam_size == 1 else
                                           f"beam {spec.decoding.beam_size}")
    lines = [f"- Base model: Whisper `{w.model}`; Linear layers at `{w.precision}` (resolved on the machine that "
             "serves it: bf16 only where the CPU has native bf16)."]
    if spec.kind in ("causal", "two-pass"):
        lines.append(f"- Causal pass: block-causal encoder over {spec.chunk_ms} ms chunks with {adapter}; {policy}.")
    if spec.kind == "two-pass":
        padding = "the hush word" if sp.padding == "hush" else sp.padding
        lines.append(f"- Verifier: the original weights over the audio + {padding} every {sp.every_ms} ms "
                     f"(window {sp.window_ms / 1000:g} s); finals on causal agreement"
                     f"{' and on two passes agreeing' if sp.self_agreement else ''}; partials: {sp.partials}.")
    seg = spec.segmentation
    lines.append(f"- Segmentation: segments end in a pause past {seg.segment_ms / 1000:g} s, at "
                 f"{seg.max_segment_ms / 1000:g} s in any case (streams of any length).")
    return lines


def _pct(value: str) -> str:
    """A tag's "0.3611 [0.3324, 0.3911]" as "36.1 % [33.2, 39.1]" (a value it cannot read: as it is)."""
    try:
        point, _, interval = value.partition(" [")
        lo, hi = (float(x) for x in interval.rstrip("]").split(",")) if interval else (None, None)
        return f"{float(point) * 100:.1f} %" + (f" [{lo * 100:.1f}, {hi * 100:.1f}]" if lo is not None else "")
    except ValueError:
        return value


def _numbers(tags: Mapping[str, str], split: str) -> str | None:
    if f"{split}_wer" not in tags:
        return None
    wer = _pct(f"{tags[f'{split}_wer']} {tags.get(f'{split}_wer_ci95', '')}".strip())
    prefix = f"{split}{DOMAIN_PREFIX}"
    per_domain = "; ".join(
        f"{k.removeprefix(prefix)} {_pct(v)} ({tags.get(f'{split}_utterances_{k.removeprefix(prefix)}', '?')} utts)"
        for k, v in sorted(tags.items()) if k.startswith(prefix) and k != f"{split}_wer_ci95")
    lat = " / ".join(f"{float(v):,.0f}" if (v := tags.get(f"{split}_word_latency_ms_{q}")) not in (None, "None")
                     else "—" for q in ("median", "p90"))
    where = tags.get("eval_set" if split == "dev" else "test_set", "")
    return f"| {split} ({where}) | {wer} | {per_domain or '—'} | {lat} ms | {tags.get(f'{split}_rtf', '—')} |"


def card(name: str, version: str, tags: Mapping[str, str], spec_values: Mapping[str, Any] | None,
         aliases: list[str] | tuple[str, ...] = ()) -> str:
    """The card's markdown for version ``version`` of ``name`` from its tags and portable spec (None: a stage's
    adapter or policy version, not a recognizer)."""
    kind = tags.get("whisperline.kind", "?")
    out = [f"## {name} v{version}: {kind} recognizer" + (f" ({tags['chunk_ms']} ms)" if tags.get("chunk_ms") else ""),
           ""]
    if spec_values is not None:
        out += ["**What it is.**", *_spec_words(from_dict(dict(spec_values))), ""]
    out += [f"**Trained on.** Dataset versions {tags.get('dataset_versions') or '—'}; code "
            f"{tags.get('git_commit', '—')[:12]}.", ""]
    rows = [r for r in (_numbers(tags, "dev"), _numbers(tags, "test")) if r]
    if rows:
        out += ["| split | WER [95 %] | per domain [95 %] | final-word latency median / p90 | RTF |",
                "|---|---|---|---|---|", *rows, "",
                "dev selected this version (the gate); test is held out, reported and never selected on." if
                len(rows) == 2 else "Not scored on the test split yet: "
                "`whisperline evaluate … --model models:/NAME/VERSION` adds its test numbers.", ""]
    else:
        out += ["Not scored yet: the pipeline's promote stage tags its dev numbers.", ""]
    if streams := tags.get("serve_max_realtime_streams"):
        out += [f"**Compute.** {streams} real-time streams on 2 cores (benchmarks/serve_load.py).", ""]
    if gate := tags.get("gate"):
        out += [f"**Gate.** {gate}", ""]
    serve_alias = aliases[0] if aliases else "<alias>"
    out += [f"**Aliases now.** {', '.join(aliases) if aliases else 'none'}", "",
            "**Serve** (127.0.0.1; an alias pointed at this version):", "",
            f"    whisperline serve-model --model {name} --alias {serve_alias}", "",
            "**Evaluate** (`--split dev` to select, the default test split only to report):", "",
            f"    whisperline evaluate DATASET_VERSION... --model models:/{name}/{version}", ""]
    return "\n".join(out)


def write_card(tracking_uri: str, name: str, version: str) -> str:
    """The version's card written into its description from what the registry holds now; returns it."""
    from mlflow.models import get_model_info  # lazy: mlflow's model loading, only where a card is written
    from mlflow.models.model import MODEL_CONFIG

    c = client(tracking_uri)
    mv = c.get_model_version(name, version)
    try:
        flavor = get_model_info(f"models:/{name}/{version}").flavors.get("python_function", {})
        spec = (flavor.get(MODEL_CONFIG) or {}).get("spec")
    except Exception:  # a version whose files cannot be read now: the card says what the tags say
        spec = None
    text = card(name, str(version), mv.tags, spec, tuple(mv.aliases or ()))
    c.update_model_version(name, version, description=text)
    return text


__all__ = ["card", "write_card"]
