"""The schema compiler: Kafka-dialect JSON schemas in, typed Python codecs out."""
