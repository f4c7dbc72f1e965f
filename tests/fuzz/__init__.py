"""The random-kernel differential fuzzer (docs/fuzzing.md)."""
