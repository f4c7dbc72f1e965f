"""``iron init [DIR]``: a new project whose one kernel, test and bench work at once."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..core.errors import IronError

HELP = "start a new project: iron.toml and a kernels module with one kernel, its test and its bench"

IRON_TOML = '''\
# An Iron project: `iron test` and `iron bench` import the modules listed here (docs/runner.md).
[iron]
modules = ["kernels"]
# Any option of docs/configuration.md may follow, e.g. backend = "vulkan"; IRON_* variables and flags override.
'''

KERNELS = '''\
"""This project's kernels, each registered with a test (against a float64 oracle) and a bench.

    iron test             # every @test_kernel on the default backend (--backend interp|vulkan|cuda)
    iron bench -v         # every @bench beside its reference, with the roofline
"""

import numpy as np

from iron import Depth, Expect, In, Setup, T, Tensor, bench, bf16, f16, f32, kernel, test_kernel, variants
from iron.lang import program_id


@kernel(variants(T=[f32, f16, bf16]))
def axpy(x: In[T], y: In[T], out: Tensor[T], alpha: f32, n: int):
    """out = alpha * x + y, computed in f32 and rounded once to T."""
    i = program_id(0)
    if i < n:
        out[i] = T(alpha * f32(x[i]) + f32(y[i]))


def axpy_oracle(x, y, out, alpha, n):
    """float64; the error is relative to the terms, not to a sum that may cancel."""
    return Expect(alpha * x + y, scale=np.abs(alpha * x) + np.abs(y))


def axpy_torch(x, y, out, alpha, n):
    """The reference on CUDA: PyTorch on the same device."""
    import torch

    return torch.add(y, x, alpha=alpha)


def axpy_numpy(x, y, out, alpha, n):
    """The reference elsewhere: numpy on the host."""
    return (np.float32(alpha) * x.astype(np.float32) + y.astype(np.float32)).astype(out.dtype)


@test_kernel(axpy, shapes=[1, 7, 255, 1000, 4099])
@bench(axpy, shapes={"interp": [1 << 16], "*": [1 << 22]}, reference={"cuda": axpy_torch, "*": axpy_numpy})
def axpy_setup(case):
    n = case.n
    return Setup(args=[case.randn(n), case.randn(n), case.empty(n), np.float32(1.5), n],
                 grid=n, group=256, oracle=axpy_oracle,
                 depth=Depth(steps=1, f32_steps=2),  # an f32 multiply and add, then one rounding to T
                 flops=2 * n)
'''

FILES = {"iron.toml": IRON_TOML, "kernels.py": KERNELS}


class InitError(IronError):
    pass


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", nargs="?", default=".", metavar="DIR", help="where to create it (default: here)")


def run(args: argparse.Namespace) -> int:
    root = Path(args.directory)
    if os.path.lexists(root) and not root.is_dir():
        what = "a symbolic link to nothing" if root.is_symlink() else "not a folder"
        raise InitError(f"{root} exists and is {what}; nothing was written. Choose a new folder: iron init NEW_DIR")
    # A symbolic link counts as taken, dangling or not: nothing is ever written through one.
    taken = [name for name in FILES if os.path.lexists(root / name)]
    if taken:
        raise InitError(f"{', '.join(str(root / n) for n in taken)} already exist(s); nothing was written. "
                        "Choose an empty folder: iron init NEW_DIR")
    created = _make_folders(root)
    written: list[Path] = []
    try:
        for name, text in FILES.items():
            _write_new(root / name, text)
            written.append(root / name)
    except OSError as e:
        for path in reversed(written):  # all or nothing: remove what this command wrote
            path.unlink(missing_ok=True)
        for folder in reversed(created):
            _remove_empty(folder)
        raise InitError(f"cannot write {e.filename or root}: {e.strerror or e}; nothing was written") from None
    print(f"created an Iron project in {root.resolve()}:")
    for path in written:
        print(f"  {path}")
    where = "" if root.resolve() == Path.cwd().resolve() else f"cd {args.directory} && "
    print(f"next: {where}iron test   (then: iron bench)")
    return 0


def _make_folders(root: Path) -> list[Path]:
    """Create ``root`` and its missing parents; the folders created, outermost first."""
    missing = [p for p in (root, *root.parents) if not os.path.lexists(p)][::-1]
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        for folder in reversed(missing):
            _remove_empty(folder)
        raise InitError(f"cannot create the folder {root}: {e.strerror or e}; nothing was written") from None
    return missing


def _write_new(path: Path, text: str) -> None:
    """Write a file that did not exist: never one that appeared since the check, never through a symlink."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        path.unlink(missing_ok=True)  # ours: O_EXCL created it
        raise


def _remove_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
