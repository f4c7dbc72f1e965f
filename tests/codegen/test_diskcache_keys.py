"""The cache envelope binds each file to its key, and the folders Iron creates carry its marker."""

from __future__ import annotations

from iron.codegen import diskcache


def test_a_file_reads_only_for_the_key_it_was_written_for(tmp_path):
    path = tmp_path / "c" / "entry.bin"
    assert diskcache.write(path, b"TEST", b"payload", key="key one") is None
    assert diskcache.read(path, b"TEST", "key one") == (b"payload", "ok")
    got, why = diskcache.read(path, b"TEST", "key two")
    assert got is None and "stored under another key" in why
    assert diskcache.read(path, b"TEST")[0] is None, "an entry with a key is not data for the empty key"
    assert diskcache.write(path, b"TEST", b"other", key="key two") is None  # the miss is replaced
    assert diskcache.read(path, b"TEST", "key two") == (b"other", "ok")


def test_the_key_is_under_the_checksum(tmp_path):
    path = tmp_path / "entry.bin"
    assert diskcache.write(path, b"TEST", b"payload", key="abc") is None
    data = path.read_bytes().replace(b"abc", b"abd")
    path.write_bytes(data)
    assert diskcache.read(path, b"TEST", "abd") == (None, "checksum mismatch (corrupt or truncated)")


def test_ensure_folder_marks_only_what_it_creates(tmp_path):
    assert diskcache.ensure_folder(tmp_path / "cache" / "spirv") is None
    assert diskcache.is_marked(tmp_path / "cache" / "spirv") and diskcache.is_marked(tmp_path / "cache")
    (tmp_path / "users").mkdir()
    assert diskcache.ensure_folder(tmp_path / "users") is None
    assert not diskcache.is_marked(tmp_path / "users")
    (tmp_path / "afile").write_text("x")
    assert "cannot create" in diskcache.ensure_folder(tmp_path / "afile" / "spirv")
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / diskcache.MARKER).write_text("not json")
    assert not diskcache.is_marked(tmp_path / "fake")
