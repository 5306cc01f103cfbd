"""Per-domain rows of a scored set: WER with its interval per domain, and each system's difference to a reference
per domain, paired.

A pooled WER hides what a user of each domain sees (docs/decisions/dev-test-split.md): one-word spoken digits, where
Whisper writes whole sentences, can decide a pooled number. A report gives each domain's rows beside the pooled one.
Domains (issue 66; the table is ``data.corpus.DOMAINS``): ``read`` English, ``l2`` English, ``spontaneous`` speech,
``commands`` (digits, spelled letters, keywords). A corpus not listed there is its own domain, named after it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from data.corpus import DOMAINS, domain_of
from evaluation import intervals

__all__ = ["DOMAINS", "by_domain", "domain_of", "markdown", "units_by_domain", "wer_tags"]

def units_by_domain(row: Mapping[str, Any], domain: Mapping[str, str] | None = None
                    ) -> dict[str | None, list[Mapping[str, Any]]]:
    """A row's ``per_utterance`` results by domain (``domain``: utt_id → domain, else each result's own ``domain``;
    None collects the results without one)."""
    out: dict[str | None, list[Mapping[str, Any]]] = defaultdict(list)
    for u in row["per_utterance"]:
        out[domain.get(u["utt_id"]) if domain is not None else u.get("domain")].append(u)
    return out


def by_domain(rows: Sequence[Mapping[str, Any]], domain: Mapping[str, str] | None = None,
              reference: str | None = None, seed: int = 0,
              n_resamples: int = intervals.N_RESAMPLES) -> dict[str, dict[str, Any]]:
    """{domain: {"utterances", "words", "wer": {system: value}, "ci95": {system: [lo, hi]}, "vs_reference":
    {system: {"diff", "ci95", "verdict"}}}} from evaluated rows (``per_utterance`` with ``utt_id``, ``errors``,
    ``ref_words`` and, without ``domain``, their own ``domain``). Every utterance must have a domain (a missing
    one raises: a silently dropped utterance would skew a domain)."""
    per_row = {r["name"]: units_by_domain(r, domain) for r in rows}
    missing = sorted({u["utt_id"] for per in per_row.values() for u in per.get(None, [])})
    if missing:
        raise ValueError(f"{len(missing)} scored utterances have no domain, e.g. {missing[:3]}")
    split: dict[str, dict[str, list[Mapping[str, Any]]]] = defaultdict(dict)
    for name, per in per_row.items():
        for d, units in per.items():
            split[d][name] = units
    out = {}
    for d, systems in sorted(split.items()):
        first = next(iter(systems.values()))
        entry: dict[str, Any] = {
            "utterances": len(first), "words": sum(u["ref_words"] for u in first),
            "wer": {name: round(intervals.point(units, "wer"), 4) for name, units in systems.items()},
            "ci95": {name: [round(x, 4) for x in intervals.ci95(units, "wer", seed=seed, n_resamples=n_resamples)]
                     for name, units in systems.items()}}
        if reference is not None and reference in systems:
            entry["vs_reference"] = {name: _rounded(intervals.compare(units, systems[reference], "wer", seed=seed,
                                                                      n_resamples=n_resamples))
                                     for name, units in systems.items() if name != reference}
        out[d] = entry
    return out


def wer_tags(row: Mapping[str, Any], prefix: str) -> dict[str, str]:
    """A registered version's per-domain numbers from its evaluated row: ``<prefix>_wer_<domain>`` → "WER [lo, hi]"
    (95 % interval) and ``<prefix>_utterances_<domain>``; none where no utterance of the row carries a domain (a row
    without per-utterance results, or scored before domains existed); some without one raise (:func:`by_domain`)."""
    units = row.get("per_utterance") or []
    if all(u.get("domain") is None for u in units):
        return {}
    tags = {}
    for d, e in by_domain([row]).items():
        lo, hi = e["ci95"][row["name"]]
        tags[f"{prefix}_wer_{d}"] = f"{e['wer'][row['name']]} [{lo}, {hi}]"
        tags[f"{prefix}_utterances_{d}"] = str(e["utterances"])
    return tags


def _rounded(c: dict[str, Any]) -> dict[str, Any]:
    return {"diff": round(c["diff"], 4), "ci95": [round(x, 4) for x in c["ci95"]], "verdict": c["verdict"]}


def markdown(domains: Mapping[str, Mapping[str, Any]], reference: str | None = None) -> str:
    """A table: a line per system, a WER column per domain with its interval (and its difference to
    ``reference``)."""
    if not domains:
        return ""
    names = list(dict.fromkeys(n for e in domains.values() for n in e["wer"]))
    lines = ["| system | " + " | ".join(f"{d} ({e['utterances']} utts, {e['words']} words)"
                                       for d, e in domains.items()) + " |",
             "|---|" + "---|" * len(domains)]
    for n in names:
        cells = []
        for e in domains.values():
            if n not in e["wer"]:
                cells.append("")
                continue
            lo, hi = e.get("ci95", {}).get(n, (None, None))
            cell = f"{100 * e['wer'][n]:.1f} %" + (f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None else "")
            vs = e.get("vs_reference", {}).get(n)
            if vs is not None:
                vlo, vhi = vs["ci95"]
                cell += f"; {100 * vs['diff']:+.1f} [{100 * vlo:+.1f}, {100 * vhi:+.1f}] {vs['verdict']}"
            cells.append(cell)
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    if reference:
        lines.append(f"\nWER [95 % interval]; after the semicolon: the difference to {reference} in points, paired "
                     "95 % interval over the domain's utterances, verdict.")
    return "\n".join(lines) + "\n"
