"""L0: wire primitives. Integers, varints with Kafka's limits, strings, bytes, arrays, uuids,
tagged-field sections, record batches and compression. Imports only the stdlib, crc32c and
cramjam (both optional: see crc.py and compression.py)."""
