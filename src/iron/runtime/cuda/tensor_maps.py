"""Encoding a kernel's tensor maps (TMA descriptors) for a launch, through the driver, cached.

A map depends on the tensor's address and on scalar arguments (its extents and row stride), so it is
encoded at launch (``cuTensorMapEncodeTiled``, a host-side call) and remembered by everything it depends
on: launches over the same arrays reuse the bytes.  A launch whose arguments break TMA's rules (an address
or row stride off 16 bytes, a matrix past its tensor) is a LaunchError naming the copy, before the kernel
runs; the portable path would read such a matrix, the hardware cannot.
"""

from __future__ import annotations

from typing import Any

from ...codegen.tensor_maps import Encoding, TensorMap, encoding
from ...core import dtypes as D
from ...core.errors import LaunchError

_MAX_CACHED = 1024


class TensorMapEncoder:
    """Encodes maps with the driver module ``drv`` (cuda.bindings.driver), remembering the last ones: by what a
    launch gives (the map, the tensor's address and size, the scalars it names), so a launch over the same
    arrays costs one dictionary lookup, not the rules and the encoding (about 10 us a map in Python)."""

    def __init__(self, drv: Any) -> None:
        self.drv = drv
        self._cache: dict[Encoding, bytes] = {}
        #: A launch's key (:meth:`key_names`) -> the map's bytes: what the generated fast launchers look up.
        self.launches: dict[tuple[Any, ...], bytes] = {}
        #: Per map (by id, the map kept alive here so the id stays its own): the scalars its extents name.
        self._names: dict[int, tuple[TensorMap, tuple[str, ...]]] = {}

    def key_names(self, m: TensorMap) -> tuple[str, ...]:
        """The scalar parameters ``m``'s extents name: a launch's key is ``(id(m), address, elements, *their
        values)``."""
        known = self._names.get(id(m))
        if known is None:
            known = self._names[id(m)] = (m, tuple(e for e in (m.rows, m.cols, m.ld, *m.outer) if isinstance(e, str)))
        return known[1]

    def encode(self, kernel: str, m: TensorMap, address: int, scalars: dict[str, Any], elements: int) -> bytes:
        key = (id(m), address, elements, *(scalars[name] for name in self.key_names(m)))
        found = self.launches.get(key)
        return found if found is not None else self.encode_key(kernel, m, key)

    def encode_key(self, kernel: str, m: TensorMap, key: tuple[Any, ...]) -> bytes:
        """``m``'s bytes for the launch ``key`` (:meth:`key_names`), checked and encoded (or found among the
        encodings made for other launches), and remembered under ``key``."""
        scalars = dict(zip(self.key_names(m), key[3:]))
        try:
            enc = encoding(m, key[1], scalars, key[2])
        except ValueError as e:
            raise LaunchError(f"kernel '{kernel}': {e}") from None
        found = self._cache.get(enc)
        if found is None:
            if len(self._cache) >= _MAX_CACHED:
                self._cache.clear()
            found = self._cache[enc] = self._encode(kernel, enc)
        if len(self.launches) >= _MAX_CACHED:
            self.launches.clear()
        self.launches[key] = found
        return found

    def _encode(self, kernel: str, enc: Encoding) -> bytes:
        d = self.drv
        u64, u32 = d.cuuint64_t, d.cuuint32_t
        names = {D.f16: "FLOAT16", D.bf16: "BFLOAT16", D.f32: "FLOAT32", D.f64: "FLOAT64", D.i32: "INT32",
                 D.u32: "UINT32", D.i64: "INT64", D.u64: "UINT64", D.u8: "UINT8", D.i8: "UINT8", D.u16: "UINT16",
                 D.i16: "UINT16", D.f8e4m3: "UINT8", D.f8e5m2: "UINT8"}
        kind = getattr(d.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{names[enc.dtype]}")
        swizzle = d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B if enc.swizzle_128b else \
            d.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE
        err, tmap = d.cuTensorMapEncodeTiled(
            kind, len(enc.dims), enc.address, [u64(x) for x in enc.dims], [u64(x) for x in enc.strides_bytes],
            [u32(x) for x in enc.box], [u32(1)] * len(enc.dims), d.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            d.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            d.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
        if int(err):
            raise LaunchError(f"kernel '{kernel}': the driver refused a tensor map ({enc}): {err}")
        return b"".join(int(w).to_bytes(8, "little") for w in tmap.opaque)
