"""Host-side bindings generated from kernels (Swift for Metal hosts)."""
