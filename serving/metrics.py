"""Prometheus metrics of one replica (``GET /metrics``), labelled by deployment and replica: what an operator needs
to see a replica falling behind without reading ``/healthz`` by hand. Names and a scrape config: docs/serving.md,
"Metrics".

One ``CollectorRegistry`` per replica (not prometheus_client's global one): a process may hold several replicas'
apps in tests, and a metric must count one replica's work only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LABELS = ("deployment", "replica")
STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)
DELAY_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
RTF_BUCKETS = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 4.0)


class ReplicaMetrics:
    def __init__(self, deployment: str, replica: str) -> None:
        self.registry = CollectorRegistry()
        self.ids = {"deployment": deployment, "replica": replica}
        r = self.registry
        self.open = Gauge("whisperline_open", "Open live streams (route=ws) and uploads (route=upload)",
                          (*LABELS, "route"), registry=r)
        self.admitted = Counter("whisperline_admitted", "Connections and uploads admitted", (*LABELS, "route"),
                                registry=r)
        self.refused = Counter("whisperline_refused", "Connections, uploads and streams refused or ended, by reason",
                               (*LABELS, "route", "reason"), registry=r)
        self.step = Histogram("whisperline_step_seconds", "Compute of one engine step (a stream's or an upload's)",
                              LABELS, buckets=STEP_BUCKETS, registry=r)
        self.final_delay = Histogram(
            "whisperline_final_word_delay_seconds", "Per final word of a live stream: its final event's emission "
            "after the audio it was decided on had arrived (the server's share of final-word latency)", LABELS,
            buckets=DELAY_BUCKETS, registry=r)
        self.rtf = Histogram("whisperline_rtf", "Compute / audio of each finished stream or upload", (*LABELS, "route"),
                             buckets=RTF_BUCKETS, registry=r)
        self.backpressure = Counter("whisperline_backpressure_waits", "Frames held back: audio came faster than "
                                    "the engine computed", LABELS, registry=r)
        self.catch_up = Counter("whisperline_catch_up_steps", "Steps that took several pieces at once (the engine "
                                "had fallen behind)", LABELS, registry=r)
        self.loaded = Counter("whisperline_versions_loaded", "Registry versions loaded (the first and hot swaps)",
                              (*LABELS, "version"), registry=r)
        self.load_failures = Counter("whisperline_version_load_failures", "Versions that failed to load (the "
                                     "current one kept serving)", (*LABELS, "version"), registry=r)
        self.swaps = Counter("whisperline_hot_swaps", "Alias moves served without a restart", LABELS, registry=r)
        self.served = Gauge("whisperline_served_version", "1 for the version new connections get", (*LABELS,
                            "version", "precision"), registry=r)

    def track_open(self, route: str, count: Callable[[], float]) -> None:
        """The open gauge of ``route`` read from ``count`` at each scrape (never out of step with the replica)."""
        self.open.labels(**self.ids, route=route).set_function(count)

    def serving(self, version: str, precision: str) -> None:
        self.served.clear()
        self.served.labels(**self.ids, version=version, precision=precision).set(1)

    def steps(self, step_ms: Iterable[float]) -> None:
        hist = self.step.labels(**self.ids)
        for ms in step_ms:
            hist.observe(ms / 1000)

    def finals(self, events: Iterable[dict]) -> None:
        hist = self.final_delay.labels(**self.ids)
        for e in events:
            if e.get("type") == "final":
                for _ in e["words"]:
                    hist.observe(max(0.0, (e["emitted_at_ms"] - e["end_ms"]) / 1000))

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


__all__ = ["ReplicaMetrics"]
