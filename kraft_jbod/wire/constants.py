"""Protocol facts that are not in any schema file: the KRaft metadata log's identity.

Kafka fixes these in code (the topic name, ``Uuid.METADATA_TOPIC_ID`` = 0:1 and the
single partition 0); every module that fetches, replicates or recognises the
metadata log imports them from here.
"""

from __future__ import annotations

import uuid
from typing import Final

METADATA_TOPIC: Final = "__cluster_metadata"
METADATA_TOPIC_ID: Final = uuid.UUID(int=1)
METADATA_PARTITION: Final = 0
