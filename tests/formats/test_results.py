import pytest

from floodmark.errors import exit_code
from floodmark.results import (
    Anomaly,
    CheckerResult,
    build_results,
    merge_validity,
    read_results,
    write_results,
)


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
