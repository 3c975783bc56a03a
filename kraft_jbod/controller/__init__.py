"""The mock KRaft controller.

``features`` holds the metadata.version table and the feature ranges the controller
supports; ``state`` is the pure KIP-858 state machine (no I/O, no clock, no asyncio)
that turns requests into metadata records and responses and rebuilds itself from those
records. The log on disk and the asyncio server live beside it and only call into it.
"""
