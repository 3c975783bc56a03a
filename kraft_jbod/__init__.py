"""kraft-jbod: Kafka's KRaft controller protocol with KIP-858 (JBOD) done right.

Importing the package loads nothing heavy: the generated message modules load on first
use through ``kraft_jbod.messages``, and servers, Spark and hypothesis only when their
commands run.
"""

__version__ = "0.1.0"
