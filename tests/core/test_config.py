"""The options registry: precedence, validation, and documentation of every option."""

from pathlib import Path

import pytest

from iron import config
from iron.config import OPTIONS, ConfigError


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    config.clear_overrides()
    for o in OPTIONS.values():
        monkeypatch.delenv(o.env, raising=False)
    monkeypatch.chdir(tmp_path)
    config.reload()
    yield
    config.clear_overrides()


def test_defaults_apply_without_any_source():
    resolved = config.resolve()
    for name, opt in OPTIONS.items():
        assert resolved[name] == (opt.default, "default")


def test_precedence_toml_then_env_then_code(tmp_path, monkeypatch):
    (tmp_path / "iron.toml").write_text("[iron]\nsimd_width = 8\nunroll_max = 16\n")
    config.reload()
    assert config.resolve()["simd_width"] == (8, str(tmp_path / "iron.toml"))
    monkeypatch.setenv("IRON_SIMD_WIDTH", "64")
    assert config.resolve()["simd_width"][0] == 8, "the environment is read once per process"
    config.reload()
    assert config.resolve()["simd_width"] == (64, "IRON_SIMD_WIDTH")
    assert config.get("unroll_max") == 16
    config.set_option("simd_width", 32)
    assert config.resolve()["simd_width"] == (32, "set in code")


def test_toml_is_found_from_a_subdirectory(tmp_path, monkeypatch):
    (tmp_path / "iron.toml").write_text("[iron]\nopt_level = 1\n")
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    config.reload()
    assert config.get("opt_level") == 1


@pytest.mark.parametrize("env, value", [("IRON_SIMD_WIDTH", "16"), ("IRON_VERIFY", "maybe"),
                                        ("IRON_BACKEND", "opencl"), ("IRON_UNROLL_MAX", "many")])
def test_bad_values_name_their_source(monkeypatch, env, value):
    monkeypatch.setenv(env, value)
    config.reload()
    with pytest.raises(ConfigError, match=env):
        config.resolve()


def test_broken_toml_is_reported_with_its_path(tmp_path):
    (tmp_path / "iron.toml").write_text("[iron\n")
    config.reload()
    with pytest.raises(ConfigError, match="iron.toml"):
        config.resolve()


def test_unknown_option_is_rejected():
    with pytest.raises(ConfigError, match="unknown option"):
        config.get("nope")


def test_every_option_is_documented():
    doc = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    for opt in OPTIONS.values():
        assert f"`{opt.env}`" in doc, f"{opt.env} missing from docs/configuration.md"
