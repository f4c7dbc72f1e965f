"""Each code-generation target as one frozen record: its names, emitter, legalisation, toolchain and device.

A backend used to be spread over a dozen name-keyed tables; now everything that differs between
targets is a field here, read by the pipeline (``fp_contract``), the emitter (``dialect``,
``legalize``, ``entry``, ``static_scratch``, ``loop_guard``), the capability checks
(``requires``, ``hints``), ``iron build`` / ``iron inspect`` (``language``, ``source_suffix``,
``binaries``, ``toolchain``) and the runtime (``device``, ``device_factory``, ``auto_rank``,
``cache_folder``).  Code elsewhere asks the record; it never tests a target's name.

One backend answers to several names: its codegen target (``spirv``), its device (``vulkan``)
and its source language (``glsl``, the ``--emit`` kind); :func:`get_backend` takes any of them.
Adding a backend is one record here, a dialect (``iron.codegen.emit``), profiles
(``iron.codegen.targets``), a toolchain module and, to run kernels, a device package.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from ..core.errors import IronError


class UnknownTargetError(IronError, ValueError):
    """A target name the code generator does not know."""


@dataclass(frozen=True)
class BinaryKind:
    """One compiled form a backend's toolchain makes (an ``iron build --emit`` kind)."""

    #: The ``--emit`` kind and the folder ``iron build`` writes it to: "cubin", "spirv", ...
    name: str
    suffix: str
    #: The ``iron.codegen.toolchains`` module that makes it; None: a tool only another OS has (xcrun).
    toolchain: str | None
    #: Whether file names carry the architecture (``entry.sm_90.cubin``).
    per_arch: bool = True
    #: What a sound binary of this kind is, for the disk cache's check of what it reads: a description,
    #: the bytes it starts with, the bytes its first 8 KB hold, the size its length is a multiple of.
    title: str = "a binary"
    signature: bytes = b""
    markers: tuple[bytes, ...] = ()
    word: int = 1

    def problem(self, data: bytes) -> str | None:
        """Why ``data`` is not a binary of this kind (truncated, another format); None when it looks like one."""
        head = data[:8192]
        if (len(data) <= max(len(self.signature), 16) or not data.startswith(self.signature)
                or len(data) % self.word or not all(m in head for m in self.markers)):
            return f"not {self.title}"
        return None


@dataclass(frozen=True)
class Backend:
    """Everything Iron needs to know about one target, in one place (docs/architecture.md)."""

    #: The codegen target: pass pipelines, profiles and IR metadata use this name.
    target: str
    description: str
    #: Whether the target's own compiler contracts ``a*b + c`` into fma by default (``targets.py``).
    fp_contract: bool
    #: The runtime device that runs it ("vulkan"); None: no device in this build.
    device: str | None = None
    #: ``"module:Class"`` of that device, imported by ``iron.runtime`` on first use; None: not in this build.
    device_factory: str | None = None
    #: The language its source is emitted in: also its ``--emit`` kind and ``iron build``'s folder.
    language: str | None = None
    source_suffix: str = ""
    #: ``"module:Class"`` of its ``iron.codegen.emit`` dialect.
    dialect: str | None = None
    #: The architecture it compiles for unless told otherwise (``iron.codegen.targets.PROFILES``).
    default_arch: str | None = None
    #: The ``iron.codegen.toolchains`` module that checks its source.
    toolchain: str | None = None
    binaries: tuple[BinaryKind, ...] = ()
    #: Its legalisation pipeline: names of ``iron.codegen.legalize.LEGALIZE_PASSES``, in order.
    legalize: tuple[str, ...] = ()
    #: A fixed entry-point name (GLSL's ``main``); None: the ABI's entry name.
    entry: str | None = None
    #: Whether the portable mma scratch is declared statically (sized per group at compile time);
    #: otherwise it is sized from the launch's group and the runtime checks it (GLSL).
    static_scratch: bool = True
    #: Whether its emitter can guard loops for drivers that cut long ones short (``loop_guard``).
    loop_guard: bool = False
    #: Language capabilities that need a profile feature on this target: capability -> feature name.
    requires: Mapping[str, str] = field(default_factory=dict)
    #: Whether its exp, log and tanh may be as far off as Vulkan's precision table allows (far looser than
    #: CUDA's few ulp): the library's oracles widen their bounds there.
    loose_math: bool = False
    #: Extra advice for capability errors, by capability.
    hints: Mapping[str, str] = field(default_factory=dict)
    #: Order in which ``backend="auto"`` tools try GPU devices (lower first); None: never picked by auto.
    auto_rank: int | None = None
    #: Whether its device takes an index (``cuda:1``: the factory's ``ordinal``).
    device_ordinals: bool = False
    #: The folder of its compiled binaries under the cache directory (None: the target's name).
    cache_folder: str | None = None
    #: Toolchain options a kernel needs when its pipeline did not contract ``a*b + c`` (``fp_contract`` off):
    #: a compiler that fuses on its own (NVRTC's default ``--fmad``) must be told not to.
    uncontracted_options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "requires", MappingProxyType(dict(self.requires)))
        object.__setattr__(self, "hints", MappingProxyType(dict(self.hints)))

    @property
    def name(self) -> str:
        return self.target

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this backend answers to: target, device, language."""
        return tuple(dict.fromkeys(n for n in (self.target, self.device, self.language) if n))

    @property
    def emits(self) -> bool:
        """Whether it emits native source (the interpreter runs the IR itself)."""
        return self.dialect is not None

    def dialect_class(self) -> Any:
        """The emitter dialect class (imported on first use: ``iron.codegen.emit`` imports this module)."""
        if self.dialect is None:
            raise UnknownTargetError(f"target {self.target!r} emits no device code")
        return _load(self.dialect)

    def binary(self, kind: str) -> BinaryKind:
        for b in self.binaries:
            if b.name == kind:
                return b
        raise UnknownTargetError(f"backend {self.target!r} makes no {kind!r}; it makes: "
                                 f"{', '.join(b.name for b in self.binaries) or 'nothing'}")


def _load(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


#: Legalisation every emitting target runs (``iron.codegen.legalize``), in order.
_COMMON_LEGALIZE = ("scalarize_vectors", "promote_narrow_floats", "widen_subgroup_values", "lower_lane_shuffles",
                    "lower_f8_to_bits")

BACKENDS: tuple[Backend, ...] = (
    Backend("interp", "the numpy interpreter (reference semantics)", fp_contract=False,
            device="interp", device_factory="iron.runtime.interp:InterpDevice"),
    Backend("cuda", "CUDA C++ through NVRTC/NVCC (--fmad=true by default)", fp_contract=True,
            device="cuda", device_factory="iron.runtime.cuda:CudaDevice",
            language="cuda", source_suffix=".cu", dialect="iron.codegen.emit.cxx:CudaDialect",
            default_arch="sm_90", toolchain="nvrtc",
            binaries=(BinaryKind("ptx", ".ptx", "nvrtc", title="PTX text", markers=(b".version", b".target")),
                      BinaryKind("cubin", ".cubin", "nvrtc", title="a CUBIN (no ELF header)",
                                 signature=b"\x7fELF")),
            legalize=_COMMON_LEGALIZE, auto_rank=0, cache_folder="cuda", uncontracted_options=("--fmad=false",),
            device_ordinals=True),
    Backend("hip", "HIP through clang/hipcc (-ffp-contract=fast-honor-pragmas by default)", fp_contract=True,
            device="hip", language="hip", source_suffix=".hip", dialect="iron.codegen.emit.cxx:HipDialect",
            default_arch="gfx90a", toolchain="hip",
            binaries=(BinaryKind("hsaco", ".hsaco", "hip", title="an AMDGPU code object (no ELF header)",
                                 signature=b"\x7fELF"),),
            legalize=(*_COMMON_LEGALIZE, "lower_bf16_to_bits")),
    Backend("spirv", "GLSL compiled to SPIR-V for Vulkan (no contraction unless the driver chooses it)",
            fp_contract=False, device="vulkan", device_factory="iron.runtime.vulkan:VulkanDevice",
            language="glsl", source_suffix=".comp", dialect="iron.codegen.emit.glsl:GlslDialect",
            default_arch="vulkan-lavapipe", toolchain="spirv",
            binaries=(BinaryKind("spirv", ".spv", "spirv", per_arch=False, title="a SPIR-V module",
                                 signature=(0x07230203).to_bytes(4, "little"), word=4),),
            # Vulkan keeps bool buffers as 32-bit words and bf16 as bits; its pow may be as far off as
            # exp2(y*log2(x)), so small constant powers become products.
            legalize=("lower_bool_tensors", *_COMMON_LEGALIZE, "lower_bf16_to_bits", "small_int_powers"),
            entry="main", static_scratch=False, loop_guard=True, loose_math=True,
            requires={"subgroup_64bit": "subgroup_extended_types"},
            hints={"atomic_f32": "float atomics need VK_EXT_shader_atomic_float: pick a profile whose device has it"},
            auto_rank=1, cache_folder="spirv"),
    Backend("metal", "Metal Shading Language (fast math, which licenses contraction, by default)", fp_contract=True,
            device="metal", language="msl", source_suffix=".metal", dialect="iron.codegen.emit.msl:MslDialect",
            default_arch="apple-m2", toolchain="metal",
            binaries=(BinaryKind("metallib", ".metallib", None, per_arch=False, title="a metallib",
                                 signature=b"MTLB"),),
            legalize=_COMMON_LEGALIZE),
)

_BY_NAME: dict[str, Backend] = {}
for _b in BACKENDS:
    for _n in _b.names:
        if _BY_NAME.setdefault(_n, _b) is not _b:  # pragma: no cover - a record clash is a programming error
            raise AssertionError(f"two backends are called {_n!r}")

#: The codegen targets, in the records' order.
TARGET_NAMES: tuple[str, ...] = tuple(b.target for b in BACKENDS)
#: The targets that emit native source.
EMITTING: tuple[Backend, ...] = tuple(b for b in BACKENDS if b.emits)
#: Every runtime device name (available in this build or not).
DEVICE_NAMES: tuple[str, ...] = tuple(b.device for b in BACKENDS if b.device)


def get_backend(name: str) -> Backend:
    """The backend called ``name`` (target, device or language name); a clear error lists the targets."""
    try:
        return _BY_NAME[name]
    except (KeyError, TypeError):
        raise UnknownTargetError(f"unknown target {name!r}; known targets: {', '.join(TARGET_NAMES)}") from None


def get_target(name: str) -> Backend:
    """The backend whose codegen target is ``name`` (not a device or language name)."""
    b = get_backend(name)
    if b.target != name:
        raise UnknownTargetError(f"unknown target {name!r}; known targets: {', '.join(TARGET_NAMES)} "
                                 f"({name!r} is the {'device' if b.device == name else 'language'} of "
                                 f"target {b.target!r})")
    return b


def by_device(device: str) -> Backend:
    """The backend of runtime device ``device``."""
    b = get_backend(device)
    if b.device != device:
        raise UnknownTargetError(f"unknown backend {device!r}; choose one of: {', '.join(DEVICE_NAMES)}")
    return b


def by_language(language: str) -> Backend:
    """The backend that emits ``language`` (an ``--emit`` kind such as "glsl")."""
    b = get_backend(language)
    if b.language != language:
        raise UnknownTargetError(f"no backend emits {language!r}; languages: "
                                 f"{', '.join(e.language for e in EMITTING if e.language)}")
    return b

