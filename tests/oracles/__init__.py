"""Oracles from other implementations that differential tests compare kraft_jbod against."""
