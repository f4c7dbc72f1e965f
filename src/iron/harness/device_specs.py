"""Datasheet ceilings of the GPUs Iron knows: peak memory bandwidth and peak FLOP/s per kind of math.

The bench table's roofline columns (%BW, %FLOP, the bottleneck verdict) divide what a kernel achieved by
these figures, so each entry names the document its numbers come from.  Conventions:

* bandwidth in GB/s (10^9 bytes per second), FLOP/s in TFLOP/s (10^12), an FMA counting as two FLOPs;
* ``f32``: the vector (SIMT) FP32 peak; ``f16`` / ``bf16``: the vector half-precision peak where the
  vendor publishes one (None otherwise: no guessing from a ratio);
* ``tensor_f16`` / ``tensor_bf16``: the matrix unit's dense peak (the datasheets' headline figures
  with 2:4 sparsity are halved), with FP32 accumulation where the vendor tells the two apart;
* a field the sources do not settle is None, and the roofline column that needs it stays blank.

:func:`lookup` matches the name a driver reports ("NVIDIA H100 80GB HBM3", "AMD Instinct MI300X",
"Apple M2 Max"); an unknown device gives None.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    vendor: str
    #: Regular expressions searched in the normalised driver name (see :func:`normalize`); first match wins.
    patterns: tuple[str, ...]
    bandwidth_gbps: float | None
    f32_tflops: float | None
    f16_tflops: float | None = None
    bf16_tflops: float | None = None
    tensor_f16_tflops: float | None = None
    tensor_bf16_tflops: float | None = None
    memory_gb: float | None = None
    compute_units: int | None = None
    #: The largest on-chip cache a bench's inputs must outgrow (L2; AMD's Infinity Cache on the MI300X), bytes.
    l2_bytes: int | None = None
    source: str = ""
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def peak_flops(self, dtype: str | None = None, matrix: bool = False) -> float | None:
        """Peak FLOP/s (not TFLOP/s) for arithmetic in ``dtype`` on the vector units, or on the matrix
        unit with ``matrix``; None where the datasheet gives no figure."""
        d = (dtype or "f32").lower()
        if matrix:
            tflops = {"f16": self.tensor_f16_tflops, "bf16": self.tensor_bf16_tflops}.get(d)
        else:
            tflops = {"f32": self.f32_tflops, "f16": self.f16_tflops, "bf16": self.bf16_tflops}.get(d)
        return None if tflops is None else tflops * 1e12

    @property
    def peak_bandwidth(self) -> float | None:
        """Peak memory bandwidth in bytes per second."""
        return None if self.bandwidth_gbps is None else self.bandwidth_gbps * 1e9

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["patterns"], d["extra"]
        return d


_NV_H100 = "NVIDIA H100 Tensor Core GPU datasheet"
_NV_H200 = "NVIDIA H200 Tensor Core GPU datasheet"
_HOPPER_VEC = "; vector FP16/BF16 from the NVIDIA H100 (Hopper) architecture whitepaper"
_NV_A100 = "NVIDIA A100 Tensor Core GPU datasheet; non-tensor FP16 from the NVIDIA Ampere GA100 architecture whitepaper"
_NV_ADA = "NVIDIA Ada GPU architecture whitepaper (GeForce RTX 4090)"
_AMD_300 = "AMD Instinct MI300X data sheet"
_AMD_250 = "AMD Instinct MI250X data sheet (MI200 series)"
_APPLE_M2PM = "Apple newsroom, M2 Pro and M2 Max announcement (January 2023); TFLOPS derived"
_APPLE_NOTE = ("Apple publishes memory bandwidth; GPU TFLOPS where Apple stated them (M1 family) or, for the M2 "
               "family, derived as GPU cores x 128 FP32 lanes x 2 x 1.398 GHz (not a vendor figure); Apple "
               "publishes no FP32 figure for M3/M4, so those are None.  Bandwidth is the top configuration's "
               "(binned M3 Max / M4 Max parts have less).")

SPECS: tuple[DeviceSpec, ...] = (
    # ---------------------------------------------------------------- NVIDIA data centre
    DeviceSpec("NVIDIA H200 NVL", "nvidia", (r"\bh200 nvl\b",), 4800, 60.0, tensor_f16_tflops=835.5,
               tensor_bf16_tflops=835.5, memory_gb=141, l2_bytes=50 << 20, source=_NV_H200,
               notes="tensor figures: the datasheet's 1,671 TFLOPS with sparsity, halved"),
    DeviceSpec("NVIDIA H200", "nvidia", (r"\bh200\b",), 4800, 67.0, f16_tflops=133.8, bf16_tflops=133.8,
               tensor_f16_tflops=989.4, tensor_bf16_tflops=989.4, memory_gb=141, compute_units=132,
               l2_bytes=50 << 20, source=_NV_H200 + _HOPPER_VEC,
               notes="SXM; tensor figures: the datasheet's 1,979 TFLOPS with sparsity, halved; same GH100 "
                     "compute as the H100 SXM"),
    DeviceSpec("NVIDIA H100 NVL", "nvidia", (r"\bh100 nvl\b",), 3900, 60.0, tensor_f16_tflops=835.5,
               tensor_bf16_tflops=835.5, memory_gb=94, l2_bytes=50 << 20, source=_NV_H100,
               notes="tensor figures: the datasheet's 1,671 TFLOPS with sparsity, halved"),
    DeviceSpec("NVIDIA H100 PCIe", "nvidia", (r"\bh100 pcie\b", r"\bh100\b.*\bpcie\b"), 2000, 51.0,
               tensor_f16_tflops=756.5, tensor_bf16_tflops=756.5, memory_gb=80, compute_units=114,
               l2_bytes=50 << 20, source=_NV_H100,
               notes="tensor figures: the datasheet's 1,513 TFLOPS with sparsity, halved"),
    DeviceSpec("NVIDIA H100 SXM", "nvidia", (r"\bh100\b",), 3350, 67.0, f16_tflops=133.8, bf16_tflops=133.8,
               tensor_f16_tflops=989.4, tensor_bf16_tflops=989.4, memory_gb=80, compute_units=132,
               l2_bytes=50 << 20, source=_NV_H100 + _HOPPER_VEC,
               notes="drivers name it 'NVIDIA H100 80GB HBM3'; tensor figures: 1,979 with sparsity, halved"),
    DeviceSpec("NVIDIA A100 80GB PCIe", "nvidia",
               (r"\ba100\b.*\b80 ?gb\b.*\bpcie\b", r"\ba100\b.*\bpcie\b.*\b80 ?gb\b"),
               1935, 19.5, f16_tflops=78.0, bf16_tflops=39.0, tensor_f16_tflops=312.0, tensor_bf16_tflops=312.0,
               memory_gb=80, compute_units=108, l2_bytes=40 << 20, source=_NV_A100),
    DeviceSpec("NVIDIA A100 80GB SXM", "nvidia", (r"\ba100\b.*\b80 ?gb\b",), 2039, 19.5, f16_tflops=78.0,
               bf16_tflops=39.0, tensor_f16_tflops=312.0, tensor_bf16_tflops=312.0, memory_gb=80, compute_units=108,
               l2_bytes=40 << 20, source=_NV_A100),
    DeviceSpec("NVIDIA A100 40GB", "nvidia", (r"\ba100\b",), 1555, 19.5, f16_tflops=78.0, bf16_tflops=39.0,
               tensor_f16_tflops=312.0, tensor_bf16_tflops=312.0, memory_gb=40, compute_units=108, l2_bytes=40 << 20,
               source=_NV_A100,
               notes="PCIe and SXM4 40 GB parts share these figures"),
    DeviceSpec("NVIDIA L40S", "nvidia", (r"\bl40s\b",), 864, 91.6, f16_tflops=91.6, bf16_tflops=91.6,
               tensor_f16_tflops=362.05, tensor_bf16_tflops=362.05, memory_gb=48, compute_units=142,
               source="NVIDIA L40S datasheet; vector FP16 = FP32 on Ada (Ada whitepaper)",
               notes="tensor figures: the datasheet's 733 TFLOPS with sparsity, halved"),
    # ---------------------------------------------------------------- NVIDIA GeForce
    DeviceSpec("NVIDIA GeForce RTX 5090", "nvidia", (r"\brtx 5090\b",), 1792, 104.8, memory_gb=32, compute_units=170,
               l2_bytes=96 << 20, source="NVIDIA RTX Blackwell GPU architecture whitepaper",
               notes="tensor FP16/BF16 with FP32 accumulation: not settled by the sources consulted, left None"),
    DeviceSpec("NVIDIA GeForce RTX 4090", "nvidia", (r"\brtx 4090\b",), 1008, 82.6, f16_tflops=82.6, bf16_tflops=82.6,
               tensor_f16_tflops=165.2, tensor_bf16_tflops=165.2, memory_gb=24, compute_units=128, l2_bytes=72 << 20,
               source=_NV_ADA,
               notes="tensor: FP16/BF16 with FP32 accumulate, dense (FP16 accumulate runs at twice that)"),
    # ---------------------------------------------------------------- AMD Instinct
    DeviceSpec("AMD Instinct MI300X", "amd", (r"\bmi300x\b",), 5300, 163.4, tensor_f16_tflops=1307.4,
               tensor_bf16_tflops=1307.4, memory_gb=192, compute_units=304, l2_bytes=256 << 20, source=_AMD_300,
               notes="FP32 vector = FP32 matrix = 163.4 on CDNA 3; matrix FP16/BF16 dense (2,614.9 with sparsity)"),
    DeviceSpec("AMD Instinct MI250X", "amd", (r"\bmi250x\b",), 1638.4, 23.95, tensor_f16_tflops=191.5,
               tensor_bf16_tflops=191.5, memory_gb=64, compute_units=110, l2_bytes=8 << 20, source=_AMD_250,
               notes="per die (GCD): HIP and Vulkan show each of the two GCDs as its own device, so these are "
                     "half the data sheet's package figures (3.2 TB/s, 47.9 FP32, 383 FP16/BF16 TFLOPS)"),
    # ---------------------------------------------------------------- Apple silicon (unified memory)
    DeviceSpec("Apple M1 Ultra", "apple", (r"\bm1 ultra\b",), 800, 21.0, memory_gb=128, compute_units=64,
               source="Apple newsroom, M1 Ultra announcement (March 2022)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M1 Max", "apple", (r"\bm1 max\b",), 400, 10.4, memory_gb=64, compute_units=32,
               source="Apple newsroom, M1 Pro and M1 Max announcement (October 2021)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M1 Pro", "apple", (r"\bm1 pro\b",), 200, 5.2, memory_gb=32, compute_units=16,
               source="Apple newsroom, M1 Pro and M1 Max announcement (October 2021)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M1", "apple", (r"\bm1\b",), 68.25, 2.6, memory_gb=16, compute_units=8,
               source="Apple M1 announcement (November 2020) for TFLOPS; bandwidth derived from LPDDR4X-4266 on a "
                      "128-bit bus (Apple did not state it)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M2 Ultra", "apple", (r"\bm2 ultra\b",), 800, 27.2, memory_gb=192, compute_units=76,
               source="Apple newsroom, M2 Ultra announcement (June 2023); TFLOPS derived", notes=_APPLE_NOTE),
    DeviceSpec("Apple M2 Max", "apple", (r"\bm2 max\b",), 400, 13.6, memory_gb=96, compute_units=38,
               source=_APPLE_M2PM, notes=_APPLE_NOTE),
    DeviceSpec("Apple M2 Pro", "apple", (r"\bm2 pro\b",), 200, 6.8, memory_gb=32, compute_units=19,
               source=_APPLE_M2PM, notes=_APPLE_NOTE),
    DeviceSpec("Apple M2", "apple", (r"\bm2\b",), 100, 3.6, memory_gb=24, compute_units=10,
               source="Apple newsroom, M2 announcement (June 2022)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M3 Ultra", "apple", (r"\bm3 ultra\b",), 819, None, memory_gb=512, compute_units=80,
               source="Apple Mac Studio technical specifications (2025)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M3 Max", "apple", (r"\bm3 max\b",), 400, None, memory_gb=128, compute_units=40,
               source="Apple MacBook Pro technical specifications (November 2023)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M3 Pro", "apple", (r"\bm3 pro\b",), 150, None, memory_gb=36, compute_units=18,
               source="Apple MacBook Pro technical specifications (November 2023)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M3", "apple", (r"\bm3\b",), 100, None, memory_gb=24, compute_units=10,
               source="Apple MacBook Pro technical specifications (November 2023)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M4 Max", "apple", (r"\bm4 max\b",), 546, None, memory_gb=128, compute_units=40,
               source="Apple newsroom, M4 Pro and M4 Max announcement (October 2024)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M4 Pro", "apple", (r"\bm4 pro\b",), 273, None, memory_gb=64, compute_units=20,
               source="Apple newsroom, M4 Pro and M4 Max announcement (October 2024)", notes=_APPLE_NOTE),
    DeviceSpec("Apple M4", "apple", (r"\bm4\b",), 120, None, memory_gb=32, compute_units=10,
               source="Apple newsroom, M4 announcement (May 2024)", notes=_APPLE_NOTE),
)

_COMPILED = tuple((spec, tuple(re.compile(p) for p in spec.patterns)) for spec in SPECS)


def normalize(device_name: str) -> str:
    """Lower case, punctuation to spaces, single spaces: "NVIDIA A100-SXM4-80GB" -> "nvidia a100 sxm4 80gb"."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", device_name.lower()).split())


def lookup(device_name: str | None) -> DeviceSpec | None:
    """The datasheet entry for the device a driver calls ``device_name``, or None for one Iron does not know.

    Entries are tried in table order, specific variants (H100 NVL, A100 80GB PCIe, M1 Max) before their
    family's general pattern.  A name carrying a vendor that contradicts the entry's never matches
    (an "AMD ... M1" is not an Apple M1).
    """
    if not device_name:
        return None
    norm = normalize(device_name)
    for spec, patterns in _COMPILED:
        if any(p.search(norm) for p in patterns) and _vendor_agrees(spec.vendor, norm):
            return spec
    return None


_VENDOR_WORDS = {"nvidia": ("nvidia", "geforce", "tesla", "quadro"), "amd": ("amd", "radeon", "instinct"),
                 "apple": ("apple",)}


def _vendor_agrees(vendor: str, norm: str) -> bool:
    words = set(norm.split())
    others = [w for v, ws in _VENDOR_WORDS.items() if v != vendor for w in ws]
    if any(w in words for w in others):
        return False
    # Apple's short names ("m1", "m2 pro") are too generic to accept without the vendor's word.
    return vendor != "apple" or "apple" in words


__all__ = ["DeviceSpec", "SPECS", "lookup", "normalize"]
