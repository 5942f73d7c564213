import pytest

from floodmark.contracts.results import (
    Anomaly,
    CheckerResult,
    build_results,
    merge_validity,
    read_results,
    write_results,
)
from floodmark.errors import exit_code


@pytest.mark.parametrize(
    ("values", "merged"),
    [([], True), ([True, True], True), ([True, "unknown"], "unknown"),
     (["unknown", False, True], False), ([False, "unknown"], False)],
)
def test_merge_priority_false_over_unknown_over_true(values, merged):
    assert merge_validity(values) == merged


def test_exit_codes():
    assert (exit_code(True), exit_code(False), exit_code("unknown")) == (0, 1, 2)


def test_results_file_round_trip(tmp_path):
    lost = Anomaly("lost-write", "acked at offset 4, missing from the final drain",
                   topic="t0", partition=1, offsets=(4,), ops=(10, 11))
    results = build_results(
        {"durability": CheckerResult(False, [lost, lost]), "hw": CheckerResult(True)},
        seed=42, config={"variant": "default"}, variant="default",
    )
    write_results(tmp_path / "results.json", results)
    back = read_results(tmp_path / "results.json")
    assert back["valid"] is False and back["seed"] == 42
    durability = back["checkers"]["durability"]
    assert durability["anomaly_counts"] == {"lost-write": 2}
    assert durability["anomalies"][0]["ops"] == [10, 11]


@pytest.mark.parametrize("content", ["[1, 2]", "{\"valid\": " + "[" * 100_000 + "]" * 100_000 + "}", "{\"valid\""])
def test_a_malformed_results_file_is_a_clear_value_error(tmp_path, content):
    path = tmp_path / "results.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="results.json"):
        read_results(path)


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("cannot be shown")


def test_a_results_file_that_cannot_be_written_leaves_the_old_one_and_no_temporary_file(tmp_path):
    """A write that fails half-way keeps the previous results.json whole and leaves nothing
    beside it (the old writer left ``results.json.tmp``, which the next check shared)."""
    target = tmp_path / "results.json"
    write_results(target, build_results({"hw": CheckerResult(True)}))
    before = target.read_bytes()
    with pytest.raises(RuntimeError):
        write_results(target, {"valid": True, "checkers": {}, "note": _Unprintable()})
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_two_checks_writing_one_run_never_share_a_temporary_file(tmp_path):
    """Each write has a temporary file of its own: one named as the old fixed one was, left by
    another writer (here a directory, so writing into it fails), is neither used nor touched."""
    target = tmp_path / "results.json"
    (tmp_path / "results.json.tmp").mkdir()
    write_results(target, build_results({"hw": CheckerResult(False)}))
    assert read_results(target)["valid"] is False
    assert (tmp_path / "results.json.tmp").is_dir()
