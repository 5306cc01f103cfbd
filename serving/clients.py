"""Per-client limits across every replica of an app: one small Serve deployment (one replica, no CPU) holds each
recognizer replica's open connections per client address, so a client cannot multiply its allowance by the number of
replicas its connections are spread over. It is part of the app: deployed, replaced if it dies and shut down with it.

Replicas die (a node lost, a SIGKILL): their entries must not lock their clients out forever. Each replica sends the
ledger its own table every ``sync_s`` (the truth about its connections, replacing what the ledger held for it); a
replica silent for ``stale_s`` is dropped. New connections are also rate-limited per client (a token bucket of
``per_minute`` connections), so a client cannot make the server do a handshake's work in a tight loop.
"""

from __future__ import annotations

import time

from ray import serve


@serve.deployment(name="client-ledger", num_replicas=1, ray_actor_options={"num_cpus": 0})
class ClientLedger:
    def __init__(self, limit: int, per_minute: float, stale_s: float = 10.0) -> None:
        self.limit, self.per_minute, self.stale_s = limit, per_minute, stale_s
        self.tables: dict[str, dict[str, int]] = {}  # replica → client → open connections
        self.seen: dict[str, float] = {}  # replica → last sync
        self.buckets: dict[str, tuple[float, float]] = {}  # client → (tokens, at)

    def _expire(self) -> None:
        now = time.monotonic()
        for replica in [r for r, t in self.seen.items() if now - t > self.stale_s]:
            self.tables.pop(replica, None)
            self.seen.pop(replica, None)

    def _rate_ok(self, client: str) -> bool:
        if not self.per_minute:
            return True
        now = time.monotonic()
        cap = max(1.0, self.per_minute / 6)  # a burst of 10 s worth
        tokens, at = self.buckets.get(client, (cap, now))
        tokens = min(cap, tokens + (now - at) * self.per_minute / 60)
        if tokens < 1:
            self.buckets[client] = (tokens, now)
            return False
        self.buckets[client] = (tokens - 1, now)
        if len(self.buckets) > 100_000:  # bounded: forget the oldest clients
            for key in sorted(self.buckets, key=lambda k: self.buckets[k][1])[:50_000]:
                del self.buckets[key]
        return True

    def enter(self, replica: str, client: str) -> str | None:
        """None (admitted, counted on ``replica``), or the refusal code."""
        self._expire()
        self.seen.setdefault(replica, time.monotonic())
        if not self._rate_ok(client):
            return "client_rate"
        if self.limit and sum(t.get(client, 0) for t in self.tables.values()) >= self.limit:
            return "client_limit"
        table = self.tables.setdefault(replica, {})
        table[client] = table.get(client, 0) + 1
        return None

    def leave(self, replica: str, client: str) -> None:
        table = self.tables.get(replica, {})
        if table.get(client, 0) > 1:
            table[client] -= 1
        else:
            table.pop(client, None)

    def sync(self, replica: str, table: dict[str, int]) -> None:
        self.tables[replica] = dict(table)
        self.seen[replica] = time.monotonic()
        self._expire()

    def open(self) -> dict[str, int]:
        self._expire()
        total: dict[str, int] = {}
        for table in self.tables.values():
            for client, n in table.items():
                total[client] = total.get(client, 0) + n
        return total


__all__ = ["ClientLedger"]
