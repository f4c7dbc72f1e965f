"""A paged KV cache against the same keys dense: ``decode_attention_paged`` over a shuffled pool of P-key pages
beside ``decode_attention`` on the dense cache and SDPA over the whole cache, kernel time (both launches) from the
CUDA profiler, the paged decode both as planned and with its table entries read a ring block early (TABLE_AHEAD); the
paged outputs must equal the dense one bit for bit.  One JSON line per shape.

Run on the GPU machine: ``PYTHONPATH=src:scripts/device python3 scripts/device/paged_check.py``.
"""

from __future__ import annotations

import json

from cuda_events import kernel_us


def main() -> None:
    import torch

    from iron.std import attention as A

    d, page = 128, 16
    for b, h, h_kv, s in ((1, 32, 8, 4096), (16, 32, 8, 4096), (16, 32, 32, 4096)):
        q = torch.randn(b, h, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, h_kv, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        lens = torch.full((b,), s, dtype=torch.int32, device="cuda")
        width = s // page
        table = torch.randperm(b * width, device="cuda").to(torch.int32).reshape(b, width)
        k_pages, v_pages = (torch.empty(b * width, page, h_kv, d, device="cuda", dtype=torch.bfloat16)
                            for _ in range(2))
        rows = torch.arange(s, device="cuda")
        for i in range(b):  # page table[i, s // P], row s % P holds key s of sequence i
            k_pages[table[i, rows // page].long(), rows % page] = k[i].transpose(0, 1)
            v_pages[table[i, rows // page].long(), rows % page] = v[i].transpose(0, 1)
        dense = A.decode_attention(q, k, v, lens)
        paged = A.decode_attention_paged(q, k_pages, v_pages, table, lens)
        A.MMA_PLAN["TABLE_AHEAD"] = 1
        ahead = A.decode_attention_paged(q, k_pages, v_pages, table, lens)
        same = bool(torch.equal(dense, paged)) and bool(torch.equal(dense, ahead))
        qs = q[:, :, None, :]
        times = {}
        for name, call, table_ahead in (  # TABLE_AHEAD: the table entries read a ring block early
                ("sdpa", lambda: torch.nn.functional.scaled_dot_product_attention(qs, k, v, enable_gqa=h != h_kv), 0),
                ("dense", lambda: A.decode_attention(q, k, v, lens, out=dense), 0),
                ("paged", lambda: A.decode_attention_paged(q, k_pages, v_pages, table, lens, out=paged), 0),
                ("paged_ahead", lambda: A.decode_attention_paged(q, k_pages, v_pages, table, lens, out=ahead), 1)):
            A.MMA_PLAN["TABLE_AHEAD"] = table_ahead
            times[name] = kernel_us(torch, call, 20)
        moved = (2 * b * h_kv * s * d + 2 * b * h * d) * 2
        print(json.dumps({"B": b, "H": h, "H_kv": h_kv, "S": s, "D": d, "P": page,
                          **{f"{n}_us": round(t, 2) for n, t in times.items()},
                          "paged_tb_s": round(moved / times["paged"] / 1e6, 2),
                          "paged_vs_dense": round(times["dense"] / times["paged"], 3),
                          "paged_vs_sdpa": round(times["sdpa"] / times["paged"], 3),
                          "ahead_vs_dense": round(times["dense"] / times["paged_ahead"], 3),
                          "ahead_vs_sdpa": round(times["sdpa"] / times["paged_ahead"], 3), "bitwise_equal": same}),
              flush=True)


if __name__ == "__main__":
    main()
