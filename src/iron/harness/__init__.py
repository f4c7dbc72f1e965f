"""iron.harness: a project's kernels, its registered tests and benches (registry, cases, tolerance), timing and
metrics; the runner process (iron.runner) runs them."""
