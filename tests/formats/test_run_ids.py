"""Run ids: a run directory's node events are read as the run's only when each ``started``
event names the run id its configuration states (floodmark.contracts.run_ids)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floodmark.contracts.node_events import NodeEventError, Started, read_events_dir
from floodmark.contracts.run_config import (
    ConfigError,
    TestConfig,
    config_from_dict,
    read_test_config,
)
from floodmark.contracts.run_ids import StatedRun, run_id_problem

RUN = "0eb44760cb914ca5"
OTHER = "7d012897c0773778"


def line(node: str, seq: int, rest: str) -> str:
    return f'{{"node":"{node}","seq":{seq},"wall":1.5,{rest}}}\n'


def started(node: str, seq: int, run_id: str | None) -> str:
    return line(node, seq, '"kind":"started"' + ("" if run_id is None else f',"run_id":"{run_id}"'))


def stopped(node: str, seq: int) -> str:
    return line(node, seq, '"kind":"stopped"')


def inactive(node: str, seq: int) -> str:
    return line(node, seq, '"kind":"broker_state","state":"Inactive","incarnation":1')


def test_a_started_event_reads_its_run_id_and_an_old_one_reads_none(tmp_path: Path) -> None:
    (tmp_path / "n1.jsonl").write_text(started("n1", 0, RUN) + stopped("n1", 1) + started("n1", 2, RUN))
    events = read_events_dir(tmp_path, run=StatedRun(RUN, "test.yaml"))["n1"]
    assert [e.body for e in events if isinstance(e.body, Started)] == [Started(run_id=RUN)] * 2
    (tmp_path / "n1.jsonl").write_text(started("n1", 0, None))
    assert read_events_dir(tmp_path, run=StatedRun(None, "test.yaml"))["n1"][0].body == Started()


def test_a_started_event_of_another_run_is_refused_naming_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "n1.jsonl").write_text(started("n1", 0, RUN) + stopped("n1", 1))
    (tmp_path / "n2.jsonl").write_text(started("n2", 0, RUN) + stopped("n2", 1) + started("n2", 2, OTHER))
    with pytest.raises(NodeEventError) as refused:
        read_events_dir(tmp_path, run=StatedRun(RUN, "run/test.yaml"))
    assert str(refused.value) == (f"{tmp_path / 'n2.jsonl'}:3: started names run id {OTHER!r}, but run/test.yaml "
                                  f"states run id {RUN!r}: these events are another run's")
    shown: list[NodeEventError] = []  # (the report shows the rest, and says what it left out)
    assert set(read_events_dir(tmp_path, run=StatedRun(RUN, "run/test.yaml"), refused=shown)) == {"n1"}
    assert [(e.source, e.line) for e in shown] == [(str(tmp_path / "n2.jsonl"), 3)]


def test_a_run_that_states_an_id_refuses_events_naming_none_or_before_any_started(tmp_path: Path) -> None:
    path = tmp_path / "n1.jsonl"
    path.write_text(started("n1", 0, None))
    with pytest.raises(NodeEventError, match=rf"n1.jsonl:1: started names no run id, but test.yaml states run id "
                                             rf"'{RUN}': these events are another run's$"):
        read_events_dir(tmp_path, run=StatedRun(RUN, "test.yaml"))
    path.write_text(stopped("n1", 0) + started("n1", 1, RUN))  # (a file whose start was cut off)
    with pytest.raises(NodeEventError, match=r"n1.jsonl:1: stopped before any started event: nothing says it is of "
                                             rf"this run \(test.yaml states run id '{RUN}'\)"):
        read_events_dir(tmp_path, run=StatedRun(RUN, "test.yaml"))
    # In the node's own order (its seq), as the checkers read it, whatever the lines' order.
    path.write_text(stopped("n1", 1) + started("n1", 0, RUN))
    assert [e.kind for e in read_events_dir(tmp_path, run=StatedRun(RUN, "test.yaml"))["n1"]] == ["started", "stopped"]
    path.write_text(started("n1", 1, RUN) + stopped("n1", 0))
    with pytest.raises(NodeEventError, match=r"n1.jsonl:2: stopped before any started event"):
        read_events_dir(tmp_path, run=StatedRun(RUN, "test.yaml"))


def test_a_run_from_before_run_ids_reads_as_it_did_and_refuses_a_newer_run_s_events(tmp_path: Path) -> None:
    path = tmp_path / "n1.jsonl"
    path.write_text(stopped("n1", 0) + started("n1", 1, None))  # (no rule on what comes first, as before)
    assert len(read_events_dir(tmp_path, run=StatedRun(None, "test.yaml"))["n1"]) == 2
    path.write_text(started("n1", 0, RUN))
    with pytest.raises(NodeEventError, match=rf"n1.jsonl:1: started names run id '{RUN}', but test.yaml states no "
                                             r"run id: these events are another run's$"):
        read_events_dir(tmp_path, run=StatedRun(None, "test.yaml"))


def test_without_a_configuration_the_files_must_name_one_run(tmp_path: Path) -> None:
    (tmp_path / "n1.jsonl").write_text(started("n1", 0, RUN))
    (tmp_path / "n2.jsonl").write_text(started("n2", 0, RUN))
    assert set(read_events_dir(tmp_path)) == {"n1", "n2"}
    (tmp_path / "n2.jsonl").write_text(started("n2", 0, None))
    with pytest.raises(NodeEventError) as refused:
        read_events_dir(tmp_path)
    assert str(refused.value) == (f"{tmp_path / 'n2.jsonl'}:1: started names no run id, but {tmp_path / 'n1.jsonl'}:1 "
                                  f"names run id {RUN!r}: the events of two runs")


IDS = (None, RUN, OTHER)
NO_CONFIGURATION = "none"
# A file: its events, each a started event naming one of IDS (by position) or another kind
# (one no other rule of a node's file is about: a stop must be followed by a start).
Files = st.lists(st.lists(st.sampled_from(["started-0", "started-1", "started-2", "other"]), max_size=4),
                 min_size=1, max_size=3)


def expected_refusal(files: list[list[str]], stated: StatedRun | None) -> tuple[int, int] | None:
    """Where reading must stop, as (file, line) from 0 and 1: the module's rules, stated
    plainly; None when every event is the run's."""
    named: list[str | None] = []  # without a configuration: the run the first started event names
    for number, events in enumerate(files):
        for position, event in enumerate(events):
            here = (number, position + 1)
            if event == "other":
                if position == 0 and stated is not None and stated.run_id is not None:
                    return here
                continue
            run_id = IDS[int(event.split("-")[1])]
            if stated is not None:
                if run_id != stated.run_id:
                    return here
            elif not named:
                named.append(run_id)
            elif run_id != named[0]:
                return here
    return None


@settings(max_examples=300, deadline=None)
@given(Files, st.sampled_from([NO_CONFIGURATION, None, RUN]))
def test_events_are_read_exactly_when_each_started_event_names_the_run(
        tmp_path_factory: pytest.TempPathFactory, files: list[list[str]], stated_id: str | None) -> None:
    """Property: over any files of started events (naming the run, another, or none) and
    other events, and whatever the configuration states (an id, none, or there is none),
    read_events_dir reads every event exactly when the rules hold, and otherwise refuses at
    the first line that breaks one, naming that file and line."""
    directory = tmp_path_factory.mktemp("events")
    for number, events in enumerate(files):
        node = f"n{number + 1}"
        (directory / f"{node}.jsonl").write_text("".join(
            inactive(node, seq) if event == "other" else started(node, seq, IDS[int(event.split("-")[1])])
            for seq, event in enumerate(events)))
    stated = None if stated_id == NO_CONFIGURATION else StatedRun(stated_id, "test.yaml")
    expected = expected_refusal(files, stated)
    if expected is None:
        read = read_events_dir(directory, run=stated)
        assert {node: len(events) for node, events in read.items()} == {
            f"n{number + 1}": len(events) for number, events in enumerate(files)}
    else:
        with pytest.raises(NodeEventError) as refused:
            read_events_dir(directory, run=stated)
        assert (refused.value.source, refused.value.line) == (str(directory / f"n{expected[0] + 1}.jsonl"), expected[1])


def test_test_yaml_states_a_run_id_as_a_token_or_not_at_all(tmp_path: Path) -> None:
    assert config_from_dict({"run_id": RUN}, "t.yaml").run_id == RUN
    assert config_from_dict({"run_id": None}, "t.yaml").run_id is None
    assert config_from_dict({}, "t.yaml").run_id is None  # (a test.yaml from before run ids)
    for wrong, said in ((1234, "expected a string, got 1234"), ("a b", "'a b' is not a run id"),
                        ("x" * 65, "'x{65}' is not a run id"), ("", "'' is not a run id")):
        with pytest.raises(ConfigError, match=rf"^t.yaml: run_id: {said}"):
            config_from_dict({"run_id": wrong}, "t.yaml")
    assert run_id_problem("A-b_9") is None


@pytest.mark.parametrize("run_id", [RUN, "0123456789012345", "1234567890123456", "12e4567890123456", "0000000000000000"])
def test_a_run_id_reads_back_from_test_yaml_as_the_string_written(tmp_path: Path, run_id: str) -> None:
    """Hexadecimal digits a YAML reader could take for a number (all digits, an exponent)
    are written quoted, and read back as the same string."""
    from floodmark.harness.config import dump_config

    path = tmp_path / "test.yaml"
    dump_config(TestConfig(seed=1, run_id=run_id), path)
    config = read_test_config(path)
    assert config is not None and config.run_id == run_id
