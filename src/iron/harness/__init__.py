"""iron.harness: finding a project's kernels (and, later, its benches and tests)."""
