"""The protocol fuzzer: generators from the compiled field tables, mutators, runner."""
