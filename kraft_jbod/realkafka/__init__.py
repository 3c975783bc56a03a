"""Real Apache Kafka processes next to the mock: brokers, and Kafka's own KRaft controller.

A user's Kafka distribution (3.9 to 4.4, ``bin/`` and ``libs/``) or the project's source
build of Kafka 4.4 runs as real JVM processes on loopback: ``process.roles=broker`` against
the mock controller (or against Kafka's controller, the twin to compare with), with several
log directories each. Nothing here contains Kafka code; it writes properties files, starts
``java ... kafka.Kafka`` and reads what the processes print.

* :mod:`.distribution` finds a distribution and its class path and release;
* :mod:`.process` runs one JVM with bounded start and stop, and reads its log;
* :mod:`.configs` writes the broker and controller properties;
* :mod:`.probe` asks a running broker questions over the wire (our codec, blocking sockets);
* :mod:`.cluster` puts a controller and N brokers together, in order, and takes them down
  brokers first;
* :mod:`.commands` is ``kraft-jbod real-cluster``.
"""
