"""Conformance statistics over captured Kafka traffic (``kraft-jbod stats``).

Layers: :mod:`.rows` turns decoded frames into narrow rows (pure); :mod:`.kip858` extracts
controller-plane events and runs the KIP-858 checks over them (pure); :mod:`.work` plans
inputs into tasks and runs one task, the unit every engine shares (pure); :mod:`.job` is
the PySpark job (the only module importing pyspark); :mod:`.report` renders the HTML
report and the text summary from the result tables; :mod:`.commands` is the CLI.

Importing this package imports nothing heavy: pyspark and pyarrow load only when a job
runs.
"""
