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
    """
    from kraft_jbod._accel import backend
    from kraft_jbod.wire import message  # noqa: F401  (installs the selected backend)

    return backend()
