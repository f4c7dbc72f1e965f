"""The options registry: precedence, validation, and documentation of every option."""

import json
import math
import os
from pathlib import Path

import pytest

from iron import config
from iron.config import OPTIONS, ConfigError
from iron.harness.project import find_project


@pytest.fixture(autouse=True)
def _clean(monkeypatch, tmp_path):
    config.clear_overrides()
    for o in OPTIONS.values():
        monkeypatch.delenv(o.env, raising=False)
    monkeypatch.delenv(config.SAFE_CONFIG_ENV, raising=False)
    monkeypatch.setattr(config, "_warned", set())  # each test sees its own warnings
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


def test_a_scoped_value_gives_way_to_what_was_there(monkeypatch):
    monkeypatch.setenv("IRON_PDL", "1")
    config.reload()
    with config.scoped("pdl", False):
        assert config.resolve()["pdl"] == (False, "set in code")
    assert config.resolve()["pdl"] == (True, "IRON_PDL"), "back to the environment's value"
    config.set_option("simd_width", 32)
    with config.scoped("simd_width", 8):
        assert config.get("simd_width") == 8
    assert config.get("simd_width") == 32, "back to the value set in code before"
    with pytest.raises(ConfigError, match="unknown option"), config.scoped("no_such_option", 1):
        pass


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


# ---------------------------------------------------------------- every option's type and range, as data
def _toml_literal(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(map(_toml_literal, v)) + "]"
    return str(v)


#: Values of the wrong type for each kind (TOML values; a string is what the environment always gives).
WRONG_TYPE = {"int": [8.9, 2.5, True, "x", "8.9", [8]], "float": [True, "x", [1.0]], "bool": ["maybe", 2, 1.5, [True]],
              "str": [5, 1.5, True, [["a"]]], "str|bool": [5, 1.5, [["a"]]], "str|int": [True, 1.5, [["a"]]]}


def _good(opt):
    """Values each option takes: its default (when it has one) and every choice, else one of its kind."""
    good = [v for v in (opt.default, *(opt.choices or ())) if v is not None]
    return good or [{"str": "none", "str|bool": True}[opt.kind]]


def _out_of_range(opt):
    """Values of the right type the option refuses: past each bound, nan and inf for numbers, off its choices."""
    bad = []
    number = opt.kind in ("int", "float")
    step = 1 if opt.kind == "int" else 0.5
    if opt.minimum is not None:
        bad.append(opt.minimum if opt.exclusive_minimum else opt.minimum - step)
        bad.append(-1e9 if opt.kind == "float" else -(10 ** 9))
    if opt.maximum is not None:
        bad.append(opt.maximum + step)
    if opt.kind == "float":
        bad += [math.nan, math.inf, -math.inf]
    if opt.choices is not None:
        bad.append(max(opt.choices) + 1 if number else "no-such-choice")
    return bad


def test_every_option_row_is_checkable():
    for opt in OPTIONS.values():
        assert opt.kind in config.KINDS, opt.name
        if opt.minimum is not None and opt.maximum is not None:
            assert opt.minimum < opt.maximum, opt.name
        assert config.parse_value(opt.name, opt.default, "test") == opt.default or opt.default is None
        if opt.kind in ("int", "float"):
            assert opt.minimum is not None or opt.choices is not None, f"{opt.name}: a number needs a range"


@pytest.mark.parametrize("name", list(OPTIONS))
def test_each_option_takes_its_good_values_from_toml_env_and_code(name, tmp_path, monkeypatch):
    opt = OPTIONS[name]
    for value in _good(opt):
        (tmp_path / "iron.toml").write_text(f"[iron]\n{name} = {_toml_literal(value)}\n")
        config.reload()
        assert config.resolve()[name] == (config.parse_value(name, value, "code"), str(tmp_path / "iron.toml"))
        env = value if isinstance(value, str) else str(value).lower()
        monkeypatch.setenv(opt.env, env)
        config.reload()
        assert config.resolve()[name][0] == config.parse_value(name, value, "code")
        monkeypatch.delenv(opt.env)


@pytest.mark.parametrize("name", list(OPTIONS))
def test_each_option_refuses_the_wrong_type(name, tmp_path):
    opt = OPTIONS[name]
    for value in WRONG_TYPE[opt.kind]:
        (tmp_path / "iron.toml").write_text(f"[iron]\n{name} = {_toml_literal(value)}\n")
        config.reload()
        with pytest.raises(ConfigError, match=f"{name}: bad value for {name}: expected "):
            config.resolve()
        if not isinstance(value, list):
            with pytest.raises(ConfigError, match="set in code"):
                config.set_option(name, value)


@pytest.mark.parametrize("name", [n for n, o in OPTIONS.items() if _out_of_range(o)])
def test_each_option_refuses_values_out_of_its_range(name, tmp_path, monkeypatch):
    opt = OPTIONS[name]
    for value in _out_of_range(opt):
        (tmp_path / "iron.toml").write_text(f"[iron]\n{name} = {_toml_literal(value)}\n")
        config.reload()
        refused = f"({name} must be |bad value for {name})"
        with pytest.raises(ConfigError, match=f"iron.toml \\[iron\\] {name}: {refused}"):
            config.resolve()
        monkeypatch.setenv(opt.env, str(value))
        with pytest.raises(ConfigError, match=f"{opt.env}: {refused}"):
            config.parse_value(name, os.environ[opt.env], opt.env)
        monkeypatch.delenv(opt.env)


@pytest.mark.parametrize("text, message", [
    ("simd_width = 8.9", "expected an integer, got 8.9"), ("opt_level = 2.9", "expected an integer, got 2.9"),
    ("unroll_max = true", "expected an integer, got True"), ("cache_dir = 5", "expected a string, got 5"),
    ("bench_reps = -1", "bench_reps must be at least 1"), ("bench_warmup = -3", "bench_warmup must be at least 0"),
    ("runner_timeout = 0", "runner_timeout must be greater than 0 seconds"),
    ("runner_timeout = -5.0", "must be greater than 0 seconds"), ("runner_timeout = nan", "must be a number, not nan"),
    ("runner_timeout = inf", "must be at most 604800 seconds \\(7 days\\)"),
    ("runner_timeout = 1e12", "must be at most 604800 seconds"),
    ("bench_seconds = 0.0", "bench_seconds must be greater than 0"), ("bench_seconds = nan", "not nan"),
])
def test_the_silent_coercions_of_issue_16_are_refused(tmp_path, text, message):
    (tmp_path / "iron.toml").write_text(f"[iron]\n{text}\n")
    config.reload()
    with pytest.raises(ConfigError, match=message):
        config.resolve()
    assert not (tmp_path / "5").exists()


@pytest.mark.parametrize("raw", ["inf", "1e12", "nan", "0", "-1"])
def test_runner_timeout_from_the_environment_is_checked_where_it_is_read(monkeypatch, raw):
    monkeypatch.setenv("IRON_RUNNER_TIMEOUT", raw)
    config.reload()
    with pytest.raises(ConfigError, match="IRON_RUNNER_TIMEOUT: runner_timeout must be"):
        config.get("runner_timeout")


def test_parse_value_applies_an_options_checks():
    assert config.parse_value("runner_timeout", "12.5", "--timeout") == 12.5
    assert config.parse_value("simd_width", 8.0, "code") == 8
    with pytest.raises(ConfigError, match="--timeout: runner_timeout must be at most"):
        config.parse_value("runner_timeout", "inf", "--timeout")
    with pytest.raises(ConfigError, match="unknown option"):
        config.parse_value("no_such", 1, "code")


# ---------------------------------------------------------------- a cache folder that cannot be
def test_a_cache_dir_of_an_unknown_users_home_fails_only_where_it_is_used(monkeypatch):
    monkeypatch.setenv("IRON_CACHE_DIR", "~no_such_user_iron/x")
    config.reload()
    assert config.get("opt_level") == 2  # everything else still resolves
    with pytest.raises(ConfigError, match="IRON_CACHE_DIR: cache_dir .* no user 'no_such_user_iron'"):
        config.cache_dir()


@pytest.mark.parametrize("where", ["home", "root", "project", "above the project"])
def test_a_cache_dir_holding_the_users_files_is_refused(where, tmp_path, monkeypatch):
    home, project = tmp_path / "home", tmp_path / "home" / "work" / "proj"
    project.mkdir(parents=True)
    (project / "iron.toml").write_text("[iron]\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project)
    folder = {"home": home, "root": Path("/"), "project": project, "above the project": project.parent}[where]
    (project / "iron.toml").write_text(f"[iron]\ncache_dir = {json.dumps(str(folder))}\n")
    config.reload()
    with pytest.raises(ConfigError, match="cache_dir .* cannot be used: .*(home|root|holds the project)"):
        config.cache_dir()
    monkeypatch.setenv("IRON_CACHE_DIR", str(project / ".iron-cache-folder"))
    config.reload()
    assert config.cache_dir() == project / ".iron-cache-folder", "a folder of its own inside the project is fine"


# ---------------------------------------------------------------- names Iron ignores: warned about
def test_an_unknown_toml_key_is_warned_about_with_the_closest_option(tmp_path, capsys):
    (tmp_path / "iron.toml").write_text('[iron]\nmodules = ["k"]\nsimd_widht = 8\nzzz = 1\n')
    config.reload()
    assert config.get("simd_width") == 32
    err = capsys.readouterr().err
    assert "[iron] simd_widht: no such option (ignored); did you mean simd_width?" in err
    assert "[iron] zzz: no such option (ignored)\n" in err and "modules" not in err
    config.reload()
    config.resolve()
    assert capsys.readouterr().err == "", "each warning is printed once per process"


def test_a_misspelt_iron_variable_is_warned_about_with_the_closest_name(monkeypatch, capsys):
    monkeypatch.setenv("IRON_BAKCEND", "interp")
    for name in config.OTHER_VARIABLES:
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("IRON_WORKS_PROJECT_TOKEN", "unrelated")  # near no Iron name: someone else's variable
    config.reload()
    config.resolve()
    err = capsys.readouterr().err
    assert err == "iron: warning: IRON_BAKCEND: no such variable (ignored); did you mean IRON_BACKEND?\n"


def test_variables_the_suite_and_scripts_read_are_known():
    """IRON_* names read outside the registry (scripts, the golden tests) are no misspelling of an option."""
    root = Path(__file__).parents[2]
    for path, name in [("tests/test_golden_ir.py", "IRON_UPDATE_GOLDEN"),
                       ("scripts/install_toolchains.sh", "IRON_SKIP_TOOLCHAINS")]:
        assert name in (root / path).read_text() and name in config.OTHER_VARIABLES


# ---------------------------------------------------------------- which iron.toml is trusted
def _owned_by_another_user(path, monkeypatch):
    if os.geteuid() == 0:
        os.chown(path, 54321, -1)
    else:  # a file of ours, read by someone else
        monkeypatch.setattr(config.os, "geteuid", lambda: os.getuid() + 1)


def test_the_search_stops_at_the_vcs_root(tmp_path, monkeypatch):
    (tmp_path / "iron.toml").write_text('[iron]\nmodules = ["planted"]\nopt_level = 0\n')
    project = tmp_path / "shared" / "proj"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    monkeypatch.chdir(project / "src")
    config.reload()
    assert config.get("opt_level") == 2 and find_project() is None, "the planted file above the root is not read"
    assert config.find_toml() is None
    (project / "iron.toml").write_text("[iron]\nopt_level = 1\n")  # the root's own file counts
    config.reload()
    assert config.find_toml() == project / "iron.toml" and config.get("opt_level") == 1


@pytest.mark.parametrize("marker", [".hg", ".svn", ".jj"])
def test_other_vcs_markers_end_the_search_too(tmp_path, monkeypatch, marker):
    (tmp_path / "iron.toml").write_text("[iron]\nopt_level = 0\n")
    (tmp_path / "p" / marker).mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "p")
    config.reload()
    assert config.get("opt_level") == 2 and config.find_toml() is None


def test_the_search_stops_at_the_home_folder(tmp_path, monkeypatch):
    (tmp_path / "iron.toml").write_text("[iron]\nopt_level = 0\n")
    home = tmp_path / "home" / "me"
    (home / "work").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "work")
    config.reload()
    assert config.get("opt_level") == 2 and config.find_toml() is None
    (home / "iron.toml").write_text("[iron]\nopt_level = 1\n")
    assert config.find_toml() == home / "iron.toml"


def test_a_toml_writable_by_others_is_refused(tmp_path):
    f = tmp_path / "iron.toml"
    f.write_text('[iron]\nmodules = ["evil"]\n')
    f.chmod(0o646)
    config.reload()
    with pytest.raises(ConfigError, match="writable by every user.*chmod o-w"):
        config.resolve()
    with pytest.raises(ConfigError, match="writable by every user"):
        find_project()


def test_a_toml_writable_by_a_shared_group_is_refused_but_not_by_the_users_own(tmp_path, monkeypatch):
    f = tmp_path / "iron.toml"
    f.write_text("[iron]\nopt_level = 1\n")
    f.chmod(0o664)
    monkeypatch.setattr(config, "_private_group", lambda gid, uid: False)
    with pytest.raises(ConfigError, match="writable by its group.*chmod g-w"):
        config.find_toml()
    monkeypatch.setattr(config, "_private_group", lambda gid, uid: True)  # umask 002 with user private groups
    assert config.find_toml() == f


def test_a_toml_owned_by_another_user_is_refused_unless_trusted(tmp_path, monkeypatch):
    f = tmp_path / "iron.toml"
    f.write_text('[iron]\nmodules = ["evil"]\ncache_dir = "/tmp/theirs"\n')
    _owned_by_another_user(f, monkeypatch)
    config.reload()
    with pytest.raises(ConfigError, match=f"{f} is owned by another user.*IRON_SAFE_CONFIG={tmp_path}"):
        config.resolve()
    with pytest.raises(ConfigError, match="owned by another user"):
        find_project()
    monkeypatch.setenv("IRON_SAFE_CONFIG", str(tmp_path))
    assert find_project().modules == ("evil",)
    monkeypatch.setenv("IRON_SAFE_CONFIG", "1")
    assert config.find_toml() == f
    monkeypatch.setenv("IRON_SAFE_CONFIG", str(tmp_path / "elsewhere"))
    with pytest.raises(ConfigError, match="owned by another user"):
        config.find_toml()


def test_a_root_owned_toml_is_trusted(tmp_path, monkeypatch):
    f = tmp_path / "iron.toml"
    f.write_text("[iron]\nopt_level = 1\n")
    if os.geteuid() != 0:
        real_stat = Path.stat
        monkeypatch.setattr(Path, "stat", lambda self, **kw: _as_root(real_stat(self, **kw)) if self == f
                            else real_stat(self, **kw))
        monkeypatch.setattr(Path, "lstat", lambda self: _as_root(real_stat(self, follow_symlinks=False)))
    config.reload()
    assert config.get("opt_level") == 1


def _as_root(st):
    return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, 0, 0, *st[6:10]))
