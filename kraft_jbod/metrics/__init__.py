"""Observability: a metrics registry, Prometheus text, StatsD over UDP, JSON-lines logs."""

from kraft_jbod.metrics.registry import Counter, Gauge, Registry, Timer

__all__ = ["Counter", "Gauge", "Registry", "Timer"]
