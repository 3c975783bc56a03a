"""The controller's metrics: requests by api and error code, brokers, directories, the log.

:class:`ControllerMetrics` owns the counters the gate increments and registers gauges
read from the running server when scraped (Prometheus text on the admin channel's
``/metrics``, and StatsD when configured). Metadata log appends (write + fsync) are
timed through the log's ``append_observer`` hook.
"""

from __future__ import annotations

import os
from typing import Any

from kraft_jbod import codec
from kraft_jbod.controller.seams import ServerView
from kraft_jbod.faults import FaultInjector, Fired
from kraft_jbod.metrics.registry import Labels, Registry


def _error_of(body: Any) -> int:
    code = getattr(body, "error_code", 0)
    return int(code) if isinstance(code, int) else 0


class ControllerMetrics:
    """Counters for the request path and gauges over one server (see the module docstring)."""

    def __init__(self, registry: Registry, faults: FaultInjector) -> None:
        self.registry = registry
        self.faults = faults
        self.requests = registry.counter("requests_total", "requests answered, by api and error code")
        self.fired = registry.counter("fault_rules_fired_total", "fault rules fired, by rule and action")
        self.auth_failures = registry.counter("authentication_failures_total", "SASL failures by listener")
        self.denied = registry.counter("authorization_denied_total", "requests denied by the ACLs")
        faults.listeners.append(self.on_fired)

    def on_fired(self, event: Fired) -> None:
        self.fired.inc(labels={"rule": event.rule_id, "action": event.action.type})

    def count_response(self, listener: str, api_key: int, body: Any) -> None:
        self.requests.inc(labels={"api": codec.api_name(api_key), "error": _error_of(body), "listener": listener})

    def observe_append(self, seconds: float) -> None:
        self.registry.observe("metadata_log_append_seconds", seconds)

    def attach(self, server: ServerView) -> None:
        """Register the gauges over ``server`` and time its log appends."""
        reg = self.registry
        if server.log is not None:
            server.log.append_observer = self.observe_append

        def per_state() -> dict[Labels, float]:
            st = server.state
            out: dict[Labels, float] = {(("state", s),): 0.0 for s in ("FENCED", "UNFENCED", "CONTROLLED_SHUTDOWN")}
            if st is not None:
                for b in st.brokers:
                    hb = st.broker_state(b)
                    if hb is not None:
                        key = (("state", hb.value),)
                        out[key] = out.get(key, 0.0) + 1
            return out

        def fenced() -> float:
            st = server.state
            return 0.0 if st is None else float(sum(1 for r in st.brokers.values() if r.fenced))

        def offline_dirs() -> dict[Labels, float]:
            st = server.state
            out: dict[Labels, float] = {}
            if st is not None:
                for b, r in st.brokers.items():
                    out[(("broker", str(b)),)] = float(len(r.registered_dirs) - len(r.online_set))
            return out

        def queued() -> dict[Labels, float]:
            st = server.state
            out: dict[Labels, float] = {}
            if st is not None:
                unassigned = st.profile.unassigned
                for b in st.brokers:
                    out[(("broker", str(b)),)] = float(len(st.replicas_in(b, unassigned)))
            return out

        def partitions() -> dict[Labels, float]:
            st = server.state
            total = offline = 0
            if st is not None:
                for p in st.partitions():
                    total += 1
                    offline += p.leader < 0
            return {(("kind", "all"),): float(total), (("kind", "offline"),): float(offline)}

        def log_bytes() -> float:
            lg = server.log
            total = 0
            for p in [] if lg is None else lg.segment_paths:
                try:
                    total += os.stat(p).st_size
                except OSError:
                    pass
            return float(total)

        def end_offset() -> float:
            lg = server.log
            return 0.0 if lg is None else float(lg.end_offset)

        reg.gauge("brokers", "registered brokers by heartbeat state", per_state)
        reg.gauge("fenced_brokers", "registered brokers that are fenced", fenced)
        reg.gauge("offline_directories", "registered log directories reported offline", offline_dirs)
        reg.gauge(
            "queued_replica_to_dir_assignments",
            "replicas the controller still sees in UNASSIGNED (assignments not yet received)",
            queued,
        )
        reg.gauge("partitions", "partitions, and those without a leader", partitions)
        reg.gauge("metadata_log_bytes", "bytes in the metadata log segments", log_bytes)
        reg.gauge("metadata_log_end_offset", "the metadata log end offset", end_offset)
        reg.gauge("fault_rules", "fault rules installed", lambda: float(len(self.faults)))
