"""``iron run MODEL.gguf --prompt 1,2,3``: generate tokens from a Llama GGUF file (iron.models), the same as
``python -m iron.models generate``."""

from __future__ import annotations

import argparse

HELP = "generate tokens from a Llama-architecture GGUF file (iron.models.llama; greedy, prefill then decode)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..models.__main__ import add_arguments as model_arguments

    model_arguments(p)


def run(args: argparse.Namespace) -> int:
    from ..models.__main__ import generate

    return generate(args)
