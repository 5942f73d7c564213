"""The recorder writes the history line by line, as HistoryWriter would, with nothing held back."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from floodmark.contracts.history import Op, read_history
from floodmark.harness.recorder import Recorder, op_line


@pytest.mark.parametrize("value", [
    None, 3, -1.5, 1e-05, "ünïcødé ✓", {"topic": "t0", "partition": 2, "value": "3-14"},
    [{"topic": "t", "partition": 0, "offset": 5, "records": [[5, "a"], [6, "b"]], "high_watermark": 7}],
    {1: "an integer key"}, 2 ** 70,
])
def test_lines_are_what_op_to_json_writes(value: object) -> None:
    op = Op(7, 123456789, "ok", 3, "send", value, node="n2", error="why")
    line = op_line(op)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    # The same JSON (a float may be spelled 1e-5 rather than 1e-05), field for field in order.
    assert list(json.loads(line).items()) == list(json.loads(op.to_json()).items())
    if not isinstance(value, float):
        assert line == (op.to_json() + "\n").encode("utf-8")


def test_every_recorded_op_is_in_the_file_before_record_returns(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    recorder = Recorder(path)
    recorder.record("invoke", 0, "send", {"topic": "t0", "partition": 1, "value": "0-1"})
    recorder.record("ok", 0, "send", {"topic": "t0", "partition": 1, "value": "0-1", "offset": 4}, node="n1")
    recorder.record("invoke", "nemesis", "start-partition", ["n1"])
    # Not closed: a harness killed now must leave these three ops readable.
    ops = read_history(path)
    assert [(op.index, op.type, op.process, op.f) for op in ops] == [
        (0, "invoke", 0, "send"), (1, "ok", 0, "send"), (2, "invoke", "nemesis", "start-partition")]
    assert ops[1].value["offset"] == 4 and ops[1].node == "n1"
    assert ops[0].time <= ops[1].time <= ops[2].time
    assert recorder.counts == {"ok": 1} and recorder.ops_recorded == 3
    recorder.close()
    with pytest.raises(ValueError, match="closed"):
        recorder.record("invoke", 1, "send", None)


def test_an_op_that_cannot_be_written_leaves_no_gap(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    recorder = Recorder(path)
    with pytest.raises(TypeError):
        recorder.record("invoke", 0, "send", object())
    recorder.record("invoke", 0, "send", "v")
    recorder.close()
    assert [op.index for op in read_history(path)] == [0]


def test_a_replayable_run_writes_its_history_in_blocks_and_all_of_it_on_close(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import floodmark.harness.recorder as recorder_module

    path = tmp_path / "history.jsonl"
    recorder = Recorder(path, durable=False)
    recorder.record("invoke", 0, "send", "v")
    recorder.record("ok", 0, "send", "v", node="n1")
    assert path.read_bytes() == b""  # held back: the run replays from its seed
    recorder.flush()
    assert [op.index for op in read_history(path)] == [0, 1]
    monkeypatch.setattr(recorder_module, "BUFFERED_BYTES", 1)  # every line fills the block
    recorder.record("invoke", 1, "poll", None)
    assert [op.index for op in read_history(path)] == [0, 1, 2]
    monkeypatch.setattr(recorder_module, "BUFFERED_BYTES", 1 << 20)
    recorder.record("ok", 1, "poll", [])
    recorder.close()
    assert [op.index for op in read_history(path)] == [0, 1, 2, 3]
    assert recorder.counts == {"ok": 2} and recorder.ops_recorded == 4
    with pytest.raises(ValueError, match="closed"):
        recorder.record("invoke", 1, "send", None)


def test_a_simulated_run_holds_its_history_back_and_writes_all_of_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from floodmark.harness.config import make_config
    from floodmark.run import runner

    made: list[Recorder] = []

    def recorder(*args: object, **kwargs: object) -> Recorder:
        made.append(Recorder(*args, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(runner, "Recorder", recorder)
    config = make_config({"cluster": "sim", "nemesis": "none", "time_limit": 1.0, "seed": 1})
    run = runner.Runner(config, str(tmp_path), out=io.StringIO(), check=False, report=False)
    assert run.run().error is None
    [used] = made
    assert not used.durable
    assert [op.index for op in read_history(run.run_dir.history)] == list(range(used.ops_recorded))
