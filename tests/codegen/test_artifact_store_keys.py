"""The artifact store keeps each entry's whole key and uses an entry only for that key (no GPU needed).

Two sound entries swapped between their file names must each read as a miss,
not as the other kernel's module; a forged entry is replaced by the next
write, and the cache folder the store creates is marked as Iron's.
"""

from __future__ import annotations

from pathlib import Path

from iron.codegen import cache as cachekey
from iron.codegen import diskcache
from iron.codegen.cache import KIND, ArtifactStore, Entry, encode


def _cubin(tag: bytes) -> bytes:
    return b"\x7fELF" + tag.ljust(124, b"\0")  # enough of an ELF header for the store's own check


def _entry(name: str) -> Entry:
    parts = cachekey.components(target="cuda", ir_hash=name * 32, source=f"// {name}", toolchain="nvrtc 13.0",
                                arch="sm_90", kind="cubin", options=[], profile="cuda:sm_90")
    return Entry(parts, name, _cubin(name.encode()), {"registers": 8})


def _fill(directory: Path) -> tuple[ArtifactStore, dict[str, tuple[str, Entry]]]:
    store = ArtifactStore(directory)
    entries = {}
    for name in ("ka", "kb"):
        e = _entry(name)
        digest = cachekey.digest(e.components)
        assert store.write(digest, e, ".cubin") is None
        entries[name] = (digest, e)
    return store, entries


def test_swapped_entries_read_as_misses_and_are_replaced(tmp_path):
    store, entries = _fill(tmp_path / "cuda")
    (da, ea), (db, eb) = entries["ka"], entries["kb"]
    pa, pb = store.path(da, ".cubin"), store.path(db, ".cubin")
    assert store.read(da, ea.components, ".cubin") == (ea, "ok")
    data_a, data_b = pa.read_bytes(), pb.read_bytes()
    pa.write_bytes(data_b)
    pb.write_bytes(data_a)
    for digest, e in ((da, ea), (db, eb)):
        got, why = store.read(digest, e.components, ".cubin")
        assert got is None and "stored under another key" in why
    assert store.write(da, ea, ".cubin") is None
    assert store.read(da, ea.components, ".cubin") == (ea, "ok")


def test_a_forged_entry_is_a_miss_then_replaced(tmp_path):
    store, entries = _fill(tmp_path / "cuda")
    digest, e = entries["ka"]
    path = store.path(digest, ".cubin")
    path.write_bytes(diskcache.wrap(KIND, encode(Entry({"other": 1}, "ka", _cubin(b"forged"), {}))))
    got, why = store.read(digest, e.components, ".cubin")
    assert got is None and "stored under another key" in why
    assert store.write(digest, e, ".cubin") is None
    assert store.read(digest, e.components, ".cubin") == (e, "ok")


def test_the_store_marks_the_folder_it_creates(tmp_path):
    _fill(tmp_path / "cache" / "cuda")
    assert diskcache.is_marked(tmp_path / "cache" / "cuda")
    assert diskcache.is_marked(tmp_path / "cache")  # made here too
    mine = tmp_path / "mine"
    mine.mkdir()
    _fill(mine)  # a folder that already existed is not claimed
    assert not diskcache.is_marked(mine)
