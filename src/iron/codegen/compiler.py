"""The one compile driver: ``compile(ir, target, options) -> Artifact``, through named stages.

Stages, in order (:data:`STAGES`):

1. ``optimise``: the target's pass pipeline (``iron.codegen.pipeline``); targets whose pipelines agree
   (``PassContext.passes_key``) share one run.  The interpreter stops here: it runs this IR.
2. ``legalise``: the kernel checked against the profile's capabilities, then the backend's legalisation
   passes (``iron.codegen.legalize``).
3. ``source``: the dialect prints the legal IR (``iron.codegen.emit``), with the ABI and launch limits.
4. ``binary``: the backend's toolchain builds one of its binary kinds (CUBIN, PTX, SPIR-V, ...).

Every stage is remembered by content in an :class:`~iron.codegen.cache.ArtifactCache` (binaries on disk
too), so a second request costs a lookup, and a disk miss says why (``cache.last_miss``).  With the
``dump`` option (``IRON_DUMP=folder``) each stage made writes its output there; ``iron inspect --stage``
prints one.  ``iron build``, ``iron inspect``, the launch path (``iron.jit``) and the devices all come
here: a device only picks the options (its profile, arch and binary kind) and loads what it gets back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .. import config
from ..core.errors import IronError
from ..core.hashing import kernel_hash
from ..core.ir import Kernel
from ..core.printer import print_kernel
from .abi import KernelABI
from .backends import EMITTING, Backend, BinaryKind, get_target
from .cache import ArtifactCache, Entry, components, default_cache, digest, explain_miss
from .targets import TargetProfile

if TYPE_CHECKING:
    from .emit import EmittedKernel
    from .pipeline import PassContext

#: The stages, in the order they run.
STAGES = ("optimise", "legalise", "source", "binary")


@dataclass(frozen=True)
class CompileOptions:
    """What to make and for what: every field is part of the cache key of the stages it reaches."""

    #: The device profile to emit for; None: the backend's default profile.
    profile: TargetProfile | None = None
    #: One of the backend's binary kinds (``Backend.binaries``: "cubin", "ptx", "spirv", ...); None: no binary.
    binary: str | None = None
    #: The architecture the binary is built for; None: the profile's.
    arch: str | None = None
    #: Extra toolchain options (NVRTC's ``--fmad=false``).
    toolchain_options: tuple[str, ...] = ()
    #: The emitter variant that reports loops a driver cut short (``Backend.loop_guard`` targets).
    loop_guard: bool = False
    #: The pass context; None: ``PassContext.for_target(target)`` (the ``iron.config`` options).
    passes: "PassContext | None" = None
    #: The input is already the pass pipeline's output (a device given optimised IR): skip ``optimise``.
    optimised: bool = False
    #: The last stage to run; None: ``binary`` when one is asked for, else ``source`` (``optimise`` for a
    #: target that emits nothing).
    stop: str | None = None

    def last_stage(self, backend: Backend) -> str:
        if self.stop is not None:
            if self.stop not in STAGES:
                raise IronError(f"unknown compile stage {self.stop!r}; stages: {', '.join(STAGES)}")
            if not backend.emits and self.stop != "optimise":
                raise IronError(f"target {backend.target!r} emits no code: its only stage is optimise (targets "
                                f"that emit: {', '.join(b.target for b in EMITTING)})")
            if self.stop == "binary" and self.binary is None:
                raise IronError(f"the binary stage needs a kind: one of "
                                f"{', '.join(b.name for b in backend.binaries) or 'none for this target'}")
            return self.stop
        if not backend.emits:
            return "optimise"
        return "binary" if self.binary is not None else "source"


#: Options the emitters read (a CUDA tile store, the wait for the previous grid): part of every stage's key past
#: ``optimise``, so a process that changes one gets the other source.
EMISSION_OPTIONS = ("tma_store", "pdl")


@dataclass(frozen=True)
class Artifact:
    """What :func:`compile` made, up to its last stage; a device loads it as it is."""

    target: str
    #: The last stage made.
    stage: str
    #: The optimised IR (None for a binary loaded ahead of time).
    kernel: Kernel | None = None
    #: The legalised IR (from stage ``legalise``).
    legal: Kernel | None = None
    #: The source, ABI and launch limits (from stage ``source``).
    emitted: "EmittedKernel | None" = None
    #: The binary (from stage ``binary``), its kind and the architecture it was built for.
    binary: bytes | None = None
    kind: str | None = None
    arch: str | None = None
    #: The toolchain's report (registers, shared memory, spills) where there is one.
    report: dict[str, Any] = field(default_factory=dict)
    #: The content address of the last stage: the binary's disk key, the optimised IR's hash for ``legalise`` and
    #: ``source``; empty for ``optimise`` (``kernel_hash(artifact.kernel)`` where needed).
    key: str = ""
    #: Where the last stage came from: the toolchain that built it, "disk", "aot", or "made".
    origin: str = "made"
    #: The function to look up, the ABI launches follow, and dynamic shared memory per group.
    entry: str = ""
    abi: KernelABI | None = None
    dynamic_shared_bytes: int = 0

    @property
    def source(self) -> str:
        assert self.emitted is not None, "this artifact stops before the source stage"
        return self.emitted.source

    @property
    def waits_upstream(self) -> bool:
        """Whether the kernel waits for the previous grid itself (a binary loaded ahead of time: unknown, so no)."""
        return self.emitted is not None and self.emitted.waits_upstream


def compile(kernel: Kernel, target: str, options: CompileOptions | None = None, *,
            cache: ArtifactCache | None = None, toolchain: ModuleType | Any = None) -> Artifact:
    """``kernel`` (frontend IR, or optimised IR with ``options.optimised``) compiled for ``target`` up to
    ``options``' last stage.  ``cache``: where stages are remembered (default: the process's cache of the
    ``cache_dir`` folder); ``toolchain``: a stand-in for the backend's toolchain module (tests)."""
    options = options or CompileOptions()
    backend = get_target(target)
    run = _Run(kernel, backend, options, cache if cache is not None else default_cache(), toolchain)
    return run.stage(options.last_stage(backend))


class _Run:
    """One call of :func:`compile`: each stage asks the cache, else makes itself from the stage before."""

    def __init__(self, kernel: Kernel, backend: Backend, options: CompileOptions, cache: ArtifactCache,
                 toolchain: Any) -> None:
        self.kernel, self.backend, self.options, self.cache = kernel, backend, options, cache
        self.toolchain_override = toolchain
        self._optimised: Kernel | None = kernel if options.optimised else None
        self._hash: str | None = None
        self._profile: TargetProfile | None = None

    @property
    def target(self) -> str:
        return self.backend.target

    def stage(self, name: str) -> Artifact:
        if name == "optimise":
            opt = self.optimised()
            return Artifact(self.target, "optimise", opt)  # no key: hashing the IR is work the launch path skips
        key = self.key(name)
        hit = self.cache.recall(key, count=name == self.options.last_stage(self.backend))
        if hit is not None:
            return hit
        made = getattr(self, f"_make_{name}")()
        _dump(made)
        return self.cache.remember(key, made)

    # ------------------------------------------------------------ keys
    def optimised(self) -> Kernel:
        if self._optimised is None:
            from .pipeline import PassContext, run_pipeline

            ctx = self.options.passes or PassContext.for_target(self.target)
            if ctx.target != self.target:
                raise ValueError(f"the pass context is for target {ctx.target!r}, not {self.target!r}")
            key = ("optimise", kernel_hash(self.kernel), ctx.passes_key)
            opt = self.cache.recall(key, count=self.options.last_stage(self.backend) == "optimise")
            if opt is None:
                opt = self.cache.remember(key, run_pipeline(self.kernel, ctx))
                _dump(Artifact(self.target, "optimise", opt))
            self._optimised = opt
        return self._optimised

    def ir_hash(self) -> str:
        if self._hash is None:
            self._hash = kernel_hash(self.optimised())
        return self._hash

    def profile(self) -> TargetProfile:
        if self._profile is None:
            from .emit import emission_profile

            self._profile = emission_profile(self.target, self.options.profile, self.options.loop_guard)
        return self._profile

    def key(self, stage: str) -> tuple:
        base = (stage, self.ir_hash(), self.target, self.profile().key, self.options.loop_guard,
                *(config.get(name) for name in EMISSION_OPTIONS))
        if stage != "binary":
            return base
        return (*base, self.kind().name, self.arch(), self.toolchain_options())

    def kind(self) -> BinaryKind:
        assert self.options.binary is not None
        return self.backend.binary(self.options.binary)

    def arch(self) -> str:
        return self.options.arch or self.profile().arch

    def toolchain_options(self) -> tuple[str, ...]:
        """The options asked for, plus what the backend needs when the pipeline did not contract."""
        opts = tuple(self.options.toolchain_options)
        if self.optimised().meta.get("contract") is False:
            opts += tuple(o for o in self.backend.uncontracted_options if o not in opts)
        return opts

    # ------------------------------------------------------------ stages
    def _make_legalise(self) -> Artifact:
        from .emit import legalise

        legal = legalise(self.optimised(), self.target, self.profile())
        return Artifact(self.target, "legalise", self.optimised(), legal, key=self.ir_hash())

    def _make_source(self) -> Artifact:
        from .emit import emit_legal

        legal = self.stage("legalise").legal
        assert legal is not None
        emitted = emit_legal(self.optimised(), legal, self.target, self.profile(), loop_guard=self.options.loop_guard)
        return Artifact(self.target, "source", self.optimised(), legal, emitted, key=self.ir_hash(),
                        entry=emitted.entry, abi=emitted.abi, dynamic_shared_bytes=emitted.dynamic_shared_bytes)

    def _make_binary(self) -> Artifact:
        src = self.stage("source")
        emitted = src.emitted
        assert emitted is not None
        tool, kind, arch, opts = self.toolchain(), self.kind(), self.arch(), self.toolchain_options()
        parts = components(target=self.target, ir_hash=self.ir_hash(), source=emitted.source,
                           toolchain=tool.version(), arch=arch, kind=kind.name, options=opts,
                           profile=self.profile().key, variant="loop-guard" if self.options.loop_guard else "")
        key = digest(parts)
        store = self.cache.store(self.backend.cache_folder or self.target)
        name = emitted.abi.entry  # GLSL's entry is always main: the index keys on the kernel's own name
        found, why = store.read(key, parts, kind.suffix, kind.problem)
        if found is not None:
            self.cache.count("disk_hits")
            return self._artifact(src, found, key, "disk")
        if why == "no file yet":
            why = explain_miss(name, store.last_build(name), parts)
        elif store.directory is not None:
            self.cache.count("rebuilt")
            why = f"{store.path(key, kind.suffix)}: {why}; rebuilt"
        built = tool.build(emitted.source, arch=arch, kind=kind.name, options=opts,
                           name=f"{name}{self.backend.source_suffix}")
        assert built.binary is not None
        report = {k: v for k, v in built.report.items() if k != "kernels"}
        if "kernels" in built.report:
            report["kernel"] = built.report["kernels"].get(emitted.entry, {})
        entry = Entry(parts, name, built.binary, report)
        failed = store.write(key, entry, kind.suffix)
        self.cache.count("compiles", why if failed is None else f"{why}; not stored: {failed}")
        if failed:
            self.cache.count("write_failures")
        return self._artifact(src, entry, key, kind.toolchain or self.target)

    def _artifact(self, src: Artifact, entry: Entry, key: str, origin: str) -> Artifact:
        return replace(src, stage="binary", binary=entry.binary, kind=self.kind().name,
                       arch=entry.report.get("arch", self.arch()), report=entry.report, key=key, origin=origin)

    def toolchain(self) -> Any:
        """The toolchain module that makes this binary kind; ToolchainMissing says how to install it."""
        if self.toolchain_override is not None:
            return self.toolchain_override
        missing = missing_toolchain(self.backend, self.kind())
        if missing is not None:
            raise missing
        return toolchain_for(self.backend, self.kind())


def toolchain_for(backend: Backend, kind: BinaryKind) -> ModuleType:
    """The ``iron.codegen.toolchains`` module that makes ``kind`` of ``backend``."""
    from .toolchains import TOOLCHAINS

    return TOOLCHAINS[kind.toolchain or backend.toolchain or ""]


def missing_toolchain(backend: Backend, kind: BinaryKind) -> Exception | None:
    """Why ``kind`` of ``backend`` cannot be built here (a ToolchainMissing saying how to install it), or None."""
    from .toolchains.common import ToolchainMissing

    module = toolchain_for(backend, kind)
    own = getattr(module, "build_missing", None)  # a kind that needs another tool (a metallib: xcrun) says so first
    missing = own(kind.name) if own is not None else None
    if missing is None and not module.available():
        missing = ToolchainMissing(module.TOOL, module.INSTALL, module.unavailable_reason())
    return missing


# ---------------------------------------------------------------- IRON_DUMP
def _dump(artifact: Artifact) -> None:
    """Write ``artifact``'s stage output under the ``dump`` folder, when that option is set."""
    folder = config.get("dump")
    if not folder:
        return
    text, suffix = stage_output(artifact)
    name = artifact.kernel.name if artifact.kernel is not None else artifact.entry
    number = STAGES.index(artifact.stage) + 1
    tag = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{name}.{artifact.target}.{number}-{artifact.stage}")
    key = artifact.key or (kernel_hash(artifact.kernel) if artifact.kernel is not None else "")
    digest_part = key[:12]
    path = Path(folder) / f"{tag}.{digest_part}{suffix}" if digest_part else Path(folder) / f"{tag}{suffix}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    except OSError as e:
        raise IronError(f"dump (IRON_DUMP={folder}): cannot write {path} ({e.strerror or e}); set it to a folder "
                        f"you can write, or unset it") from None


def stage_output(artifact: Artifact) -> tuple[str | bytes, str]:
    """(the output of ``artifact``'s last stage, its file suffix): IR text, source, or the binary."""
    backend = get_target(artifact.target)
    if artifact.stage == "binary":
        assert artifact.binary is not None and artifact.kind is not None
        return artifact.binary, backend.binary(artifact.kind).suffix
    if artifact.stage == "source":
        return artifact.source, backend.source_suffix
    ir = artifact.legal if artifact.stage == "legalise" else artifact.kernel
    assert ir is not None
    return print_kernel(ir), ".ir"
