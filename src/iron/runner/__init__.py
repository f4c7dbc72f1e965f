"""iron.runner: the child process that runs a project's tests and benches (``python -m iron.runner``).

See :mod:`iron.runner.main` and docs/runner.md; the CLI side is :mod:`iron.cli.project_runner`.
"""
