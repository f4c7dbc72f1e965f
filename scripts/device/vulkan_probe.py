"""Print what the Vulkan driver of this machine offers Iron: devices, subgroup size, cooperative matrices.

Run on a GPU machine (the H200 through the device tool) to record what its driver reports; it needs
only the loader and the ``vulkan`` binding, nothing else of Iron.
"""

from __future__ import annotations

import json
import sys

import vulkan as vk

COMPONENT = {getattr(vk, n): n.removeprefix("VK_COMPONENT_TYPE_").removesuffix("_KHR")
             for n in dir(vk) if n.startswith("VK_COMPONENT_TYPE_") and n.endswith("_KHR")}
SCOPE = {getattr(vk, n): n.removeprefix("VK_SCOPE_").removesuffix("_KHR")
         for n in dir(vk) if n.startswith("VK_SCOPE_") and n.endswith("_KHR")}


def main() -> int:
    app = vk.VkApplicationInfo(pApplicationName="iron-probe", apiVersion=vk.VK_MAKE_VERSION(1, 3, 0))
    instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(pApplicationInfo=app), None)
    out = []
    for physical in vk.vkEnumeratePhysicalDevices(instance):
        props = vk.vkGetPhysicalDeviceProperties(physical)
        exts = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical, None)}
        entry = {"name": props.deviceName, "api": vk.VK_VERSION_MAJOR(props.apiVersion) * 100
                 + vk.VK_VERSION_MINOR(props.apiVersion), "coopmat_khr": "VK_KHR_cooperative_matrix" in exts,
                 "combos": []}
        if entry["coopmat_khr"]:
            fn = vk.vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
            for p in fn(physical):
                entry["combos"].append([p.MSize, p.NSize, p.KSize, COMPONENT.get(p.AType, p.AType),
                                        COMPONENT.get(p.BType, p.BType), COMPONENT.get(p.CType, p.CType),
                                        COMPONENT.get(p.ResultType, p.ResultType), bool(p.saturatingAccumulation),
                                        SCOPE.get(p.scope, p.scope)])
        out.append(entry)
    vk.vkDestroyInstance(instance, None)
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
