"""The replica's background work (mixed into ``serving.app.Recognizer``): following the alias (hot swap) and
keeping the app's client ledger in step with this replica's table. Their state is the Recognizer's."""

from __future__ import annotations

import logging
import time

from serving.models import load, resolve

log = logging.getLogger("whisperline.serving")


class ReplicaUpkeep:
    def _sync_clients(self) -> None:
        """This replica's table to the ledger, every 2 s: the truth that replaces what the ledger counted for it."""
        while not self._stop.wait(2.0):
            try:
                version, table = self.clients.snapshot()
                self.ledger.sync.remote(self.replica_id, table, version).result(timeout_s=10)
            except Exception as err:  # the ledger is being replaced: the next sync rebuilds it
                log.warning("client ledger sync: %s", err)

    def _loaded(self, model) -> None:
        self.metrics.loaded.labels(**self.metrics.ids, version=model.version.version).inc()
        self.metrics.serving(model.version.version, model.precision)

    def _watch(self) -> None:
        s = self.settings
        while not self._stop.wait(s.poll_s):
            found = None
            try:
                found = resolve(s.tracking_uri, s.registered_model, s.alias)
                if found.version != self.current.version.version and found.version != self.failed_version:
                    started = time.perf_counter()
                    loaded = load(s.tracking_uri, found, s.precision)
                    old, self.current = self.current.version.version, loaded  # one reference swap: atomic
                    self._loaded(loaded)
                    self.metrics.swaps.labels(**self.metrics.ids).inc()
                    self.swaps.append({"from": old, "to": found.version, "load_s": round(time.perf_counter() - started, 2),
                                       "at": time.time()})
                    log.info("alias %s moved: version %s -> %s", s.alias, old, found.version)
                    self.failed_version = None
                self.watch_error = None if found.version != self.failed_version else self.watch_error
            except Exception as err:  # the registry is down or the new version fails to load: keep serving
                self.watch_error = f"{type(err).__name__}: {str(err)[:300]}"
                # a version that failed to load is not retried every poll (it would be loaded again and again);
                # the alias moving on, or back to it after a fix, is a new attempt
                self.failed_version = found.version if found is not None else None
                if found is not None:
                    self.metrics.load_failures.labels(**self.metrics.ids, version=found.version).inc()
                log.warning("alias watcher: %s", self.watch_error)


__all__ = ["ReplicaUpkeep"]
