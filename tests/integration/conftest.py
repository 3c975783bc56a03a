"""The plugin's fixtures, imported so these tests run with or without its pytest11 entry point."""

from kraft_jbod.pytest_plugin import kraft_clock, kraft_cluster, kraft_faults

__all__ = ["kraft_clock", "kraft_cluster", "kraft_faults"]
