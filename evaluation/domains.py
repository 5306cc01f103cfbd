"""Per-domain rows of a scored set: WER per corpus, and a system's difference to a reference per corpus, paired.

A pooled WER can hide that one domain decides it (docs/decisions/dev-test-split.md): a report that names the
corpora beside the pooled number shows what a dev choice could see.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from data.manifest import read_manifest
from evaluation import intervals


def corpus_of(version_dirs: Sequence[str]) -> dict[str, str]:
    """{utterance key: corpus} from dataset versions' manifests."""
    out: dict[str, str] = {}
    for d in version_dirs:
        table = read_manifest(d)
        out.update(zip(table["key"].to_pylist(), table["corpus"].to_pylist(), strict=True))
    return out


def by_domain(rows: Sequence[Mapping[str, Any]], domain: Mapping[str, str], reference: str | None = None,
              seed: int = 0) -> dict[str, dict[str, Any]]:
    """{domain: {"utterances", "words", "wer": {system: value}, "vs_reference": {system: {"diff", "ci95",
    "verdict"}}}} from evaluated rows (``per_utterance`` with ``utt_id``, ``errors``, ``ref_words``). Every
    utterance must have a domain (a missing one raises: a silently dropped utterance would skew a domain)."""
    missing = sorted({u["utt_id"] for r in rows for u in r["per_utterance"]} - set(domain))
    if missing:
        raise ValueError(f"{len(missing)} scored utterances have no domain, e.g. {missing[:3]}")
    split: dict[str, dict[str, list[Mapping[str, Any]]]] = defaultdict(dict)
    for r in rows:
        per: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for u in r["per_utterance"]:
            per[domain[u["utt_id"]]].append(u)
        for d, units in per.items():
            split[d][r["name"]] = units
    out = {}
    for d, systems in sorted(split.items()):
        first = next(iter(systems.values()))
        entry: dict[str, Any] = {"utterances": len(first), "words": sum(u["ref_words"] for u in first),
                                 "wer": {name: round(intervals.point(units, "wer"), 4)
                                         for name, units in systems.items()}}
        if reference is not None:
            entry["vs_reference"] = {name: _rounded(intervals.compare(units, systems[reference], "wer", seed=seed))
                                     for name, units in systems.items() if name != reference}
        out[d] = entry
    return out


def _rounded(c: dict[str, Any]) -> dict[str, Any]:
    return {"diff": round(c["diff"], 4), "ci95": [round(x, 4) for x in c["ci95"]], "verdict": c["verdict"]}


def markdown(domains: Mapping[str, Mapping[str, Any]], reference: str | None = None) -> str:
    """A table: a line per domain, a WER column per system (with its difference to ``reference``)."""
    names = list(next(iter(domains.values()))["wer"]) if domains else []
    lines = ["| domain | utts | words | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
    for d, e in domains.items():
        cells = []
        for n in names:
            cell = f"{100 * e['wer'][n]:.1f} %"
            vs = e.get("vs_reference", {}).get(n)
            if vs is not None:
                lo, hi = vs["ci95"]
                cell += f" ({100 * vs['diff']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}])"
            cells.append(cell)
        lines.append(f"| {d} | {e['utterances']} | {e['words']} | " + " | ".join(cells) + " |")
    if reference:
        lines.append(f"\nIn brackets: the difference to {reference} in points, paired 95 % interval over the "
                     "domain's utterances.")
    return "\n".join(lines) + "\n"
