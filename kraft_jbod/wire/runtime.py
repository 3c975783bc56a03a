"""Helpers every generated message module calls: the errors their codecs raise.

Kept out of the generated modules so there is one copy of each rule (and one place
a compiled accelerator can mirror). Generated code imports these under short
private aliases; nothing else should need them.
"""

from __future__ import annotations

from kraft_jbod.errors import DecodeError, EncodeError


def absent(field: str, version: int | str) -> EncodeError:
    """A field that does not exist at ``version`` holds a non-default value."""
    return EncodeError(f"attempted to write a non-default {field} at version {version}", field_path=field)


def null(field: str) -> EncodeError:
    """None where the version does not allow null."""
    return EncodeError("None in a non-nullable field", field_path=field)


def bad_tag(tag: int, version: int, pos: int) -> DecodeError:
    """A known tag that the schema does not allow at ``version`` (Kafka rejects these)."""
    return DecodeError(f"tag {tag} is not valid for version {version}", offset=pos)


def check_bool(value: object, field: str) -> bool:
    """``value`` if it is a real bool; struct.pack would accept any truthy object."""
    if type(value) is not bool:
        raise EncodeError(f"expected bool, got {type(value).__name__}", field_path=field)
    return value
