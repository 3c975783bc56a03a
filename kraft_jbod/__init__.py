"""kraft-jbod: Kafka's KRaft controller protocol with KIP-858 (JBOD) done right.

Importing the package loads nothing heavy: the generated message modules load on first
use through ``kraft_jbod.messages``, and servers, Spark and hypothesis only when their
commands run.
"""

__version__ = "0.1.0"


def codec_backend() -> str:
    """``"c"`` when the compiled codec serves ``decode``/``encode``, else ``"python"``.

    The compiled codec is built by ``pip install`` when a C compiler is present;
    ``KRAFT_JBOD_CODEC=python`` forces the pure-Python one (see kraft_jbod/_accel).
    Before the codec is first imported this is the backend its import will install, found
    without importing it (``kraft-jbod --version`` stays light).

    Raises:
        ImportError: ``KRAFT_JBOD_CODEC`` is unknown, or ``c`` and the extension is not built.
    """
    from kraft_jbod._accel import current

    return current()
