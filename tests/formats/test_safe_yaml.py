"""floodmark.inputs.safe_yaml: yaml.safe_load's answers, but hostile nesting is refused, never a crash."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from report_fixtures import make_minimal_run

from floodmark.inputs.safe_yaml import (
    MAX_DEPTH,
    YamlTooDeep,
    _load,
    _PyLoader,
    describe_error,
    load_yaml,
)

DEEP = 100_000  # libyaml's own composer (CSafeLoader) segfaults on documents this deep
HOSTILE = {
    "flow sequences": "[" * DEEP + "]" * DEEP,
    "unclosed flow sequences": "[" * DEEP,
    "flow mappings": "{a: " * DEEP + "1" + "}" * DEEP,
    "block sequences": "- " * DEEP + "x\n",
    "complex keys": "? " * DEEP + "x\n",
}

DOCUMENTS = [
    "",
    "# only a comment\n",
    "name: queue-all-default\nseed: 7\nnemesis: [partition, kill]\ntime_limit: 60\n",
    "- 1\n- two\n- {three: 3}\n",
    "base: &b {x: 1, y: [1, 2]}\nd:\n  <<: *b\n  y: 3\n",
    "shared: &s [1, 2]\nagain: [*s, *s]\n",
    "when: 2026-01-01 10:00:00\nday: 2026-01-02\n",
    "set: !!set {a, b}\nomap: !!omap [a: 1, b: 2]\nbin: !!binary aGVsbG8=\n",
    "x: ~\ny: yes\nz: 0o17\nw: .inf\nv: -.5e3\n",
    "---\na: 1\n...\n",
    "text: |\n  line one\n  line two\nfolded: >\n  a\n  b\n",
    "[1, {a: [b, {c: d}]}]",
]


def _loaders() -> list[Any]:
    return [load_yaml, lambda text: _load(_PyLoader, text, "<string>", MAX_DEPTH)]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_loads_exactly_what_safe_load_gives(text: str) -> None:
    for load in _loaders():
        assert load(text) == yaml.safe_load(text)
    assert load_yaml(text.encode("utf-8")) == yaml.safe_load(text)


@pytest.mark.parametrize("text", [
    "a: 1\n---\nb: 2\n",  # two documents
    "!!python/object/apply:os.system [echo hi]",  # never anything but plain data
    "a: *undefined\n",
    "a: [1\n",
    "a: b: c\n",
    "\x00\x01",
])
def test_malformed_yaml_raises_the_same_yaml_error(text: str) -> None:
    with pytest.raises(yaml.YAMLError) as expected:
        yaml.safe_load(text)
    kind = type(expected.value)
    for load in _loaders():
        with pytest.raises(yaml.YAMLError) as raised:
            load(text)
        assert type(raised.value) is kind


@pytest.mark.parametrize(("text", "where", "problem"), [
    ("a: 1\nwhen: 2026-13-45\n", "line 2, column 7", "not a valid timestamp: month must be in 1..12"),
    ("seed: " + "9" * 5000, "line 1, column 7", "not a valid int: Exceeds the limit"),
])
def test_values_python_cannot_hold_are_yaml_errors_with_their_line(text: str, where: str, problem: str) -> None:
    with pytest.raises(ValueError):  # what PyYAML alone lets out, past every `except yaml.YAMLError`
        yaml.safe_load(text)
    for load in _loaders():
        with pytest.raises(yaml.YAMLError) as raised:
            load(text)
        assert describe_error(raised.value).startswith(f"{where}: {problem}")


def test_nesting_up_to_the_limit_loads_and_one_more_is_refused() -> None:
    for load in _loaders():
        at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
        assert load(at_limit) == yaml.safe_load(at_limit)
        with pytest.raises(YamlTooDeep) as raised:
            load("a:\n  b: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
        assert f"nested more than {MAX_DEPTH} levels deep" in str(raised.value)
        assert raised.value.problem_mark.line == 1  # type: ignore[union-attr]
    assert load_yaml("[[[]]]", max_depth=3) == [[[]]]
    with pytest.raises(YamlTooDeep):
        load_yaml("[[[]]]", max_depth=2)


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_nesting_is_refused_in_process_without_a_crash(kind: str) -> None:
    """Run in a child process: a regression here would be a segfault, which must not kill pytest."""
    script = textwrap.dedent("""
        import sys
        from floodmark.inputs.safe_yaml import YamlTooDeep, describe_error, load_yaml
        try:
            load_yaml(sys.stdin.read(), "hostile/test.yaml")
        except YamlTooDeep as e:
            print("refused:", describe_error(e))
            print(e)
        else:
            print("loaded")
    """)
    done = subprocess.run([sys.executable, "-c", script], input=HOSTILE[kind], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "refused: line 1, column " in done.stdout and f"nested more than {MAX_DEPTH} levels deep" in done.stdout
    assert 'in "hostile/test.yaml", line 1' in done.stdout  # the file and line, in the error itself


def test_the_pure_python_loader_refuses_hostile_nesting_too() -> None:
    for text in HOSTILE.values():
        with pytest.raises(YamlTooDeep):
            _load(_PyLoader, text, "x.yaml", MAX_DEPTH)


def test_nesting_through_aliases_counts() -> None:
    chain = "\n".join(["a0: &a0 []"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, MAX_DEPTH + 5)])
    for load in _loaders():
        with pytest.raises(YamlTooDeep, match="through aliases"):
            load(chain)
        with pytest.raises(YamlTooDeep, match="contains itself"):
            load("&a [1, *a]")
        with pytest.raises(YamlTooDeep, match="contains itself"):
            load("top: &t {child: {back: *t}}")
    shallow = "\n".join(["a0: &a0 []"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 50)])
    assert load_yaml(shallow) == yaml.safe_load(shallow)


def test_a_caller_deep_in_its_own_stack_gets_an_error_not_recursion_error() -> None:
    text = "[" * 90 + "]" * 90
    limit = sys.getrecursionlimit()

    def at_depth(n: int) -> Any:
        return at_depth(n - 1) if n else _load(_PyLoader, text, "deep.yaml", MAX_DEPTH)

    depth = len(inspect.stack(0))
    sys.setrecursionlimit(depth + 120)
    try:
        with pytest.raises(YamlTooDeep, match="deep.yaml: nested too deeply to load"):
            at_depth(10)
    finally:
        sys.setrecursionlimit(limit)


def test_describe_error_gives_line_column_and_problem() -> None:
    with pytest.raises(yaml.YAMLError) as raised:
        load_yaml("a: 1\nb: [1\n", "t.yaml")
    assert describe_error(raised.value).startswith("line 3, column 1: ")
    with pytest.raises(yaml.YAMLError) as raised:
        load_yaml("\x00")
    assert "unacceptable character" in describe_error(raised.value)


# --- every place the project reads YAML keeps its own error contract ------------------


def test_load_config_names_the_file_and_line(tmp_path: Path) -> None:
    from floodmark.harness.config import ConfigError, load_config

    path = tmp_path / "deep.yaml"
    path.write_text("nodes: 3\nnemesis: " + HOSTILE["flow sequences"] + "\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert str(path) in message and "line 2" in message and "nested more than 100 levels deep" in message
    path.write_text("nodes: 3\nseed: 2026-13-45\n")  # PyYAML alone: a ValueError traceback
    with pytest.raises(ConfigError, match=r"line 2, column \d+: not a valid timestamp: month must be in 1\.\.12"):
        load_config(path)


def test_run_readers_report_a_deep_test_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from floodmark.cli import main
    from floodmark.contracts.run_config import ConfigError, read_test_config
    from floodmark.pipeline import records
    from floodmark.reports.run_data import load_run
    from floodmark.run_dirs.rundir import RunDir

    path = make_minimal_run(tmp_path, name="deep", seed=1, stamp="20260101T000000", verdict=None)
    (path / "test.yaml").write_text(HOSTILE["block sequences"])
    run = RunDir(path)
    with pytest.raises(records.RunRejected, match=r"test.yaml: not valid YAML \(line 1, column \d+: nested more than 100"):
        records.read_config(run)
    with pytest.raises(ConfigError, match=r"test.yaml: not valid YAML \(line 1, column \d+: nested more than 100"):
        read_test_config(run.config)  # what `floodmark check` reads a run's configuration with
    data = load_run(path)  # the report still renders, with the config unread and a warning saying why
    assert data.config is None and any("test.yaml" in w and "nested more than 100" in w for w in data.warnings)
    assert main(["check", str(path)]) == 254  # `floodmark check`: file: problem, exit 254, no traceback
    err = capsys.readouterr().err
    assert "nested more than 100 levels deep" in err and str(path / "test.yaml") in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
