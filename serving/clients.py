"""Per-client limits across every replica of an app: one small Serve deployment (one replica, no CPU) holds each
recognizer replica's open connections per client address, so a client cannot multiply its allowance by the number of
replicas its connections are spread over. It is part of the app: deployed, replaced if it dies and shut down with it.

Replicas die (a node lost, a SIGKILL): their entries must not lock their clients out forever. Each replica sends the
ledger its own table every ``sync_s`` (the truth about its connections, replacing what the ledger held for it); a
replica silent for ``stale_s`` is dropped. A table is a snapshot taken on the replica's sync thread, and it can arrive
after a connection the snapshot missed has been counted here; so every change and snapshot carries the replica's
change counter (``serving.guard.ClientTable.version``), a snapshot older than a change already counted is dropped, and
a change the latest snapshot already holds is not counted twice. A replica counts a connection before it asks here,
so a snapshot taken while it waits holds it (one taken while a refused connection is being taken back holds it
too: the client is over-counted until the next sync, never under-counted). New connections are also rate-limited per client (a token bucket of
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
        self.versions: dict[str, int] = {}  # replica → newest change counter counted (ClientTable.version)
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

    def _held(self, replica: str, version: int | None) -> bool:
        """Whether the replica's latest table here already holds its change ``version``; records it as seen."""
        held = version is not None and version <= self.versions.get(replica, -1)
        if version is not None:
            self.versions[replica] = max(version, self.versions.get(replica, -1))
        return held

    def _drop(self, replica: str, client: str) -> None:
        table = self.tables.get(replica, {})
        if table.get(client, 0) > 1:
            table[client] -= 1
        else:
            table.pop(client, None)

    def enter(self, replica: str, client: str, version: int | None = None) -> str | None:
        """None (admitted, counted on ``replica``), or the refusal code. ``version``: the replica's change counter
        after it counted this connection itself (it takes it back when refused)."""
        self._expire()
        self.seen.setdefault(replica, time.monotonic())
        held = self._held(replica, version)
        table = self.tables.setdefault(replica, {})
        if not held:
            table[client] = table.get(client, 0) + 1
        code = None
        if not self._rate_ok(client):
            code = "client_rate"
        elif self.limit and sum(t.get(client, 0) for t in self.tables.values()) > self.limit:
            code = "client_limit"
        if code:  # the replica takes the connection back: so does its table here
            self._drop(replica, client)
        return code

    def leave(self, replica: str, client: str, version: int | None = None) -> None:
        if not self._held(replica, version):
            self._drop(replica, client)

    def sync(self, replica: str, table: dict[str, int], version: int | None = None) -> None:
        self.seen[replica] = time.monotonic()
        if version is None or version >= self.versions.get(replica, -1):
            self.tables[replica] = dict(table)
            if version is not None:
                self.versions[replica] = version
        self._expire()

    def open(self) -> dict[str, int]:
        self._expire()
        total: dict[str, int] = {}
        for table in self.tables.values():
            for client, n in table.items():
                total[client] = total.get(client, 0) + n
        return total


__all__ = ["ClientLedger"]
