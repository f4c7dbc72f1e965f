"""Cooperative matrices (VK_KHR_cooperative_matrix): the shapes and types a device offers, in Iron's terms.

``vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`` lists every
(M, N, K, A, B, C, Result, saturating, scope) combination the device runs.
Iron keeps those its ``mma`` op can use: subgroup scope, no saturating
accumulation, A and B of one type and C of the result's type, as
``(M, N, K, input, accumulator)`` tuples of dtype names
(:func:`usable_combos`), which ``iron.codegen.targets.vulkan_device_profile``
takes.  Component types from other extensions (bfloat16, fp8, packed int8),
which need features of their own, are dropped.
"""

from __future__ import annotations

from types import ModuleType, SimpleNamespace
from typing import Any, Iterable

EXTENSION = "VK_KHR_cooperative_matrix"
ENUMERATE = "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"

#: VkComponentTypeKHR values of VK_KHR_cooperative_matrix itself -> Iron dtype names.
COMPONENT_TYPES: dict[int, str] = {0: "f16", 1: "f32", 2: "f64", 3: "i8", 4: "i16", 5: "i32", 6: "i64",
                                   7: "u8", 8: "u16", 9: "u32", 10: "u64"}
#: VK_SCOPE_SUBGROUP_KHR.
SCOPE_SUBGROUP = 3

_VK_SUCCESS, _VK_INCOMPLETE = 0, 5

#: The fields of VkCooperativeMatrixPropertiesKHR Iron reads.
FIELDS = ("MSize", "NSize", "KSize", "AType", "BType", "CType", "ResultType", "saturatingAccumulation", "scope")

Combo = tuple[int, int, int, str, str]


def usable_combos(records: Iterable[Any]) -> tuple[Combo, ...]:
    """The ``(M, N, K, input, accumulator)`` combos Iron can use among VkCooperativeMatrixPropertiesKHR records
    (anything with their field names), sorted and without repeats."""
    found = set()
    for r in records:
        if int(r.scope) != SCOPE_SUBGROUP or r.saturatingAccumulation:
            continue
        if int(r.AType) != int(r.BType) or int(r.CType) != int(r.ResultType):
            continue
        a, c = COMPONENT_TYPES.get(int(r.AType)), COMPONENT_TYPES.get(int(r.CType))
        if a is None or c is None:
            continue
        found.add((int(r.MSize), int(r.NSize), int(r.KSize), a, c))
    return tuple(sorted(found))


def enumerate_properties(vk: ModuleType, function: Any, physical_device: Any) -> list[Any]:
    """Every VkCooperativeMatrixPropertiesKHR ``function`` (the raw entry point) reports.

    The binding's own wrapper hands the driver a zeroed array; the specification wants each
    element's ``sType`` set, so the two-call enumeration is done here.
    """
    for _ in range(8):  # the count can grow between the two calls (VK_INCOMPLETE): ask again
        count = vk.ffi.new("uint32_t*")
        result = function(physical_device, count, vk.ffi.NULL)
        if result != _VK_SUCCESS:
            raise vk.exception_codes.get(result, vk.VkError)()
        records = vk.ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
        for i in range(count[0]):
            records[i].sType = vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
        result = function(physical_device, count, records)
        if result == _VK_SUCCESS:  # plain copies: the cdata records die with their array
            return [SimpleNamespace(**{f: int(getattr(records[i], f)) for f in FIELDS}) for i in range(count[0])]
        if result != _VK_INCOMPLETE:
            raise vk.exception_codes.get(result, vk.VkError)()
    return []


def query_combos(vk: ModuleType, instance: Any, physical_device: Any) -> tuple[Combo, ...]:
    """The usable combos of a device that offers VK_KHR_cooperative_matrix (through the instance's entry point)."""
    address = vk.lib.vkGetInstanceProcAddr(instance, ENUMERATE.encode())
    if address == vk.ffi.NULL:
        return ()
    function = vk.ffi.cast(f"PFN_{ENUMERATE}", address)
    try:
        return usable_combos(enumerate_properties(vk, function, physical_device))
    except (vk.VkError, vk.VkException):  # a driver that cannot list them offers none: no reason to fail the device
        return ()
