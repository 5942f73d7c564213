"""Node events: typed kinds, and the ``events/<node>.jsonl`` files they are written to and read from."""

from __future__ import annotations

import json
import os
import time
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from node_event_examples import WRITTEN, line

from floodmark.contracts.node_events import (
    KINDS,
    Acked,
    BecameFollower,
    BecameLeader,
    ControllerElected,
    HwChanged,
    IsrChanged,
    KnownKind,
    LogDirOffline,
    NodeEvent,
    NodeEventError,
    NodeEventWriter,
    Started,
    UnknownKind,
    event_from_fields,
    iter_events,
    read_events_dir,
)


def test_the_examples_cover_every_kind() -> None:
    assert {type(body) for _, body in WRITTEN} == set(typing.get_args(KnownKind))
    assert {body.kind for _, body in WRITTEN} == KINDS


def test_every_kind_reads_from_its_line_and_writes_the_same_bytes(tmp_path) -> None:
    written = "".join(line(seq, rest) for seq, (rest, _) in enumerate(WRITTEN))
    (tmp_path / "before.jsonl").write_text(written)
    events = list(iter_events(tmp_path / "before.jsonl"))
    assert [e.body for e in events] == [body for _, body in WRITTEN]
    assert all(e.node == "n1" and e.wall == 1.5 and e.extra == () for e in events)
    writer = NodeEventWriter(tmp_path / "after.jsonl", "n1")
    for e in events:
        writer.write(e.wall, e.body)
    writer.close()
    assert (tmp_path / "after.jsonl").read_text() == written
    assert "".join(json.dumps(e.to_dict(), separators=(",", ":")) + "\n" for e in events) == written


def test_an_unknown_kind_and_unknown_fields_are_kept_not_refused(tmp_path) -> None:
    path = tmp_path / "n1.jsonl"
    path.write_text(line(0, '"kind":"became_observer","topic":"t","lag":[1,2]')
                    + line(1, '"kind":"hw_changed","topic":"t","partition":0,"leader_epoch":2,"role":"leader",'
                              '"previous":3,"high_watermark":6,"log_end":6,"lag_ms":12,"cause":{"why":"fetch"}'))
    observer, hw = iter_events(path)
    assert observer.body == UnknownKind("became_observer", {"topic": "t", "lag": [1, 2]})
    assert observer.kind == "became_observer" and observer.fields() == {"topic": "t", "lag": [1, 2]}
    assert isinstance(hw.body, HwChanged) and hw.body.high_watermark == 6
    assert hw.extra == (("lag_ms", 12), ("cause", {"why": "fetch"}))
    assert list(hw.fields())[-2:] == ["lag_ms", "cause"]
    writer = NodeEventWriter(tmp_path / "copy.jsonl", "n1")
    writer.write(1.5, observer.body)
    writer.close()
    assert (tmp_path / "copy.jsonl").read_text() == path.read_text().splitlines(keepends=True)[0]


@pytest.mark.parametrize(("rest", "problem"), [
    ('"kind":"became_follower","topic":"t","partition":0,"leader_epoch":"2","leader":1,"log_end":5',
     "became_follower: leader_epoch must be an integer, got '2'"),
    ('"kind":"became_follower","topic":"t","partition":0,"leader_epoch":2,"leader":1',
     "became_follower: missing field 'log_end'"),
    ('"kind":"became_follower","topic":"t","partition":0,"leader_epoch":2,"leader":null,"log_end":5',
     "became_follower: missing field 'leader'"),
    ('"kind":"isr_changed","topic":"t","partition":0,"leader_epoch":2,"isr":[1,"2"],"zk_version":7,"change":"shrink"',
     "isr_changed: isr must be a list of integers"),
    ('"kind":"leader_elected","topic":"t","partition":0,"leader":2,"leader_epoch":3,"isr":[2],'
     '"controller_epoch":1,"zk_version":4,"unclean":0', "leader_elected: unclean must be true or false"),
    ('"kind":"log_dir_offline","dir":"/a","error":"EIO","partitions":[["t"]]',
     "log_dir_offline: partitions must be a list of [a string, an integer] items"),
    ('"kind":"rejected","request":"Fetch","why":"x","replica":true', "rejected: replica must be an integer"),
])
def test_a_known_kind_with_a_missing_or_mistyped_field_names_the_file_and_line(tmp_path, rest, problem) -> None:
    path = tmp_path / "n3.jsonl"
    path.write_text(line(0, '"kind":"started"') + line(1, rest))
    with pytest.raises(NodeEventError, match="n3.jsonl:2") as raised:
        list(iter_events(path))
    assert raised.value.problem.startswith(problem)


def test_absent_optional_fields_read_as_none_and_are_not_written() -> None:
    event = event_from_fields("n1", 0, 0.0, "acked", {"topic": "t", "partition": 0, "offset": 5,
                                                      "high_watermark": 6, "acks": -1})
    assert event.body == Acked(topic="t", partition=0, offset=5, high_watermark=6, acks=-1)
    assert event.fields() == {"topic": "t", "partition": 0, "offset": 5, "high_watermark": 6, "acks": -1}


def test_a_misspelt_or_missing_field_is_refused_when_the_event_is_made() -> None:
    with pytest.raises(TypeError):
        BecameFollower(topic="t", partition=0, leader_epcoh=2, leader=1, log_end=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        ControllerElected(controller_epoch=1)  # type: ignore[call-arg]


def test_events_are_immutable_values() -> None:
    a = NodeEvent("n1", 0, 1.0, IsrChanged(topic="t", partition=0, leader_epoch=1, isr=(1,), zk_version=0,
                                             change="shrink"))
    b = NodeEvent("n1", 0, 1.0, IsrChanged(topic="t", partition=0, leader_epoch=1, isr=(1,), zk_version=0,
                                             change="shrink"))
    assert a == b and hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.body.leader_epoch = 2  # type: ignore[misc]


def test_writer_numbers_events_and_continues_after_restart(tmp_path) -> None:
    path = tmp_path / "events" / "n1.jsonl"
    w = NodeEventWriter(path, "n1")
    w.write(100.0, BecameLeader(topic="t0", partition=0, leader_epoch=1, isr=(1,), log_end=0, high_watermark=0))
    w.write(101.0, HwChanged(topic="t0", partition=0, leader_epoch=1, role="leader", previous=0, high_watermark=3,
                             log_end=3))
    w.close()
    # A crash leaves half a line; the restarted node seals it and continues numbering.
    with open(path, "a") as f:
        f.write('{"node": "n1", "seq": 2, "ki')
    w = NodeEventWriter(path, "n1")
    assert w.seq == 2
    w.write(50.0, Started())
    w.close()
    events = read_events_dir(tmp_path / "events")["n1"]
    assert [e.seq for e in events] == [0, 1, 2]
    assert isinstance(events[0].body, BecameLeader) and events[0].body.leader_epoch == 1
    assert events[2].body == Started()


def test_numbering_continues_past_a_line_whose_body_is_malformed(tmp_path) -> None:
    path = tmp_path / "n1.jsonl"
    path.write_text(line(0, '"kind":"started"') + line(1, '"kind":"controller_elected","controller_epoch":"x"'))
    assert NodeEventWriter(path, "n1").seq == 2


def test_malformed_event_line_names_file_and_line(tmp_path) -> None:
    path = tmp_path / "n2.jsonl"
    path.write_text('{"node": "n2", "seq": 0, "kind": "started"}\nnot json\n{"node":"n2","seq":1,"kind":"x"}\n')
    with pytest.raises(NodeEventError, match="n2.jsonl:2"):
        list(iter_events(path))


def test_a_broker_without_orjson_still_writes_its_events(tmp_path) -> None:
    # The broker image is built from Debian packages, which have no orjson.
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['orjson'] = None\n"
        "import floodmark.reference.real.process\n"
        "from floodmark.contracts.node_events import LogDirOffline, NodeEventWriter, iter_events\n"
        f"w = NodeEventWriter({str(tmp_path / 'n1.jsonl')!r}, 'n1')\n"
        "w.write(1.5, LogDirOffline(dir='/a', error='EIO', partitions=(('t', 0),)))\n"
        "w.close()\n"
        f"print([e.body for e in iter_events({str(tmp_path / 'n1.jsonl')!r})])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[LogDirOffline(dir='/a', error='EIO', partitions=(('t', 0),))]"
    assert (tmp_path / "n1.jsonl").read_text() == line(0, '"kind":"log_dir_offline","dir":"/a","error":"EIO",'
                                                          '"partitions":[["t",0]]')


def test_the_line_of_every_kind_holds_what_encode_body_gives_in_the_same_order() -> None:
    from floodmark.contracts.node_events import encode_body, event_line

    for _, body in WRITTEN:
        envelope = {"node": "n2", "seq": 7, "wall": 2.25, "kind": body.kind}
        assert event_line("n2", 7, 2.25, body) == (json.dumps(encode_body(body, envelope),
                                                              separators=(",", ":")) + "\n").encode()


def test_an_events_directory_holds_each_nodes_events_once(tmp_path) -> None:
    from floodmark.contracts.node_events import read_events_dir

    started = '{"node": "n2", "seq": 0, "kind": "started", "broker": 2}\n'
    (tmp_path / "n2.jsonl").write_text(started + '{"node": "n2", "seq": 0, "kind": "stopped"}\n')
    with pytest.raises(NodeEventError, match=r"n2.jsonl:2: seq 0 again \(first on line 1\)"):
        read_events_dir(tmp_path)
    (tmp_path / "n2.jsonl").write_text(started.replace('"n2"', '"n1"'))
    with pytest.raises(NodeEventError, match="n2.jsonl:1: an event of node 'n1' in the file of node 'n2'"):
        read_events_dir(tmp_path)
    (tmp_path / "n2.jsonl").write_text(started)
    [event] = read_events_dir(tmp_path)["n2"]
    assert event.body == Started(broker=2)


def test_only_a_last_line_cut_short_is_forgiven(tmp_path) -> None:
    path = tmp_path / "n1.jsonl"
    started = '{"node": "n1", "seq": 0, "kind": "started", "broker": 1}\n'
    path.write_text(started + '{"node": "n1", "seq": 1, "kind": "sto')  # killed mid-write
    assert [e.seq for e in iter_events(path, "n1")] == [0]
    path.write_text(started + '{"node": "n1", "seq": 1, "kind": "stopped"}}')  # complete, then garbage
    with pytest.raises(NodeEventError, match="n1.jsonl:2"):
        list(iter_events(path, "n1"))


# ----------------------------------------------------------------------------- what no node writes

# (field, the lowest value a node writes there): leader epochs from NO_EPOCH (-1: none known),
def test_a_file_copied_under_another_nodes_name_is_refused_naming_it(tmp_path) -> None:
    """The audit's finding: events/n2.jsonl holding n1's events, each line's node renamed,
    made the leader checker find two leaders per epoch (INVALID). Its ``started`` event still
    says broker 1, as n1's file does: the file is refused, and the one named is the one whose
    name is not the broker's."""
    n1 = line(0, '"kind":"started","broker":1') + line(1, WRITTEN[0][0])
    (tmp_path / "n1.jsonl").write_text(n1)
    (tmp_path / "n2.jsonl").write_text(n1.replace('"node":"n1"', '"node":"n2"'))
    with pytest.raises(NodeEventError) as refused:
        read_events_dir(tmp_path)
    assert str(refused.value) == (f"{tmp_path}/n2.jsonl:1: an event of node 'n1' in the file of node 'n2': it says "
                                  f"it is broker 1, as {tmp_path}/n1.jsonl:1 does")
    (tmp_path / "n2.jsonl").write_text(n1.replace('"node":"n1"', '"node":"n2"').replace('"broker":1', '"broker":2'))
    (tmp_path / "n1.jsonl").write_text(n1.replace('"broker":1', '"broker":2'))  # n1 is the copy, named before n2
    with pytest.raises(NodeEventError, match=r"n1.jsonl:1: an event of node 'n2' in the file of node 'n1'"):
        read_events_dir(tmp_path)
    refused_files: list[NodeEventError] = []
    assert set(read_events_dir(tmp_path, refused=refused_files)) == {"n2"}  # (a report shows the rest)
    assert [e.source for e in refused_files] == [str(tmp_path / "n1.jsonl")]


def test_a_controller_election_names_the_broker_its_file_is_of(tmp_path) -> None:
    (tmp_path / "n1.jsonl").write_text(line(0, '"kind":"started","broker":1')
                                       + line(1, '"kind":"controller_elected","controller_epoch":1,"broker":3'))
    with pytest.raises(NodeEventError, match=r"n1.jsonl:2: controller_elected says node 'n1' is broker 3, but line 1 "
                                             r"says it is broker 1$"):
        read_events_dir(tmp_path)
    (tmp_path / "n1.jsonl").write_text(line(0, '"kind":"started"')  # (an older file: no id until elected)
                                       + line(1, '"kind":"controller_elected","controller_epoch":1,"broker":1'))
    assert [e.kind for e in read_events_dir(tmp_path)["n1"]] == ["started", "controller_elected"]


LOWERED_HW = ('"kind":"hw_changed","topic":"t","partition":0,"leader_epoch":2,"role":"leader","previous":6,'
              '"high_watermark":3,"log_end":6')


def test_an_event_after_a_clean_stop_with_no_start_between_is_refused_naming_its_line(tmp_path) -> None:
    """(regression, 2026-11-28) A stopped process starts again before it emits anything. A HW
    lowered after a ``stopped`` with no ``started`` between was read, and the hw checker, which
    starts a broker afresh where its process changes, passed it: check said VALID."""
    path = tmp_path / "n1.jsonl"
    path.write_text(line(0, '"kind":"started","broker":1') + line(1, '"kind":"stopped"') + line(2, LOWERED_HW))
    with pytest.raises(NodeEventError) as refused:
        read_events_dir(tmp_path)
    assert str(refused.value) == (f"{path}:3: hw_changed after the clean stop on line 2 with no started between "
                                  "(a stopped process starts again before it emits anything)")
    refused_files: list[NodeEventError] = []
    assert read_events_dir(tmp_path, refused=refused_files) == {} and len(refused_files) == 1  # (a report)
    path.write_text(line(0, '"kind":"started","broker":1') + line(1, '"kind":"stopped"')
                    + line(2, '"kind":"started","broker":1') + line(3, LOWERED_HW) + line(4, '"kind":"stopped"'))
    assert [e.kind for e in read_events_dir(tmp_path)["n1"]] == ["started", "stopped", "started", "hw_changed",
                                                                 "stopped"]


# What may follow a stop, and what may not: a start; an event of a known kind, of an unknown
# one, and another stop.
_AFTER = {"started": '"kind":"started","broker":1', "stopped": '"kind":"stopped"', "hw_changed": LOWERED_HW,
          "broker_state": '"kind":"broker_state","state":"Inactive","incarnation":41',
          "became_observer": '"kind":"became_observer","topic":"t"'}


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(sorted(_AFTER)), max_size=8), st.randoms(use_true_random=False))
def test_a_file_is_refused_exactly_where_a_stop_is_followed_by_anything_but_a_start(
        tmp_path_factory: pytest.TempPathFactory, kinds: list[str], random: typing.Any) -> None:
    """Property: judged in the node's order (``seq``), whatever order the lines are in, a file
    reads whole unless a ``stopped`` is followed by an event other than ``started``; then it is
    refused naming the line of the first such event and of the stop before it."""
    order = list(range(len(kinds)))
    random.shuffle(order)  # line n holds seq order[n]
    directory = tmp_path_factory.mktemp("events")
    (directory / "n1.jsonl").write_text("".join(line(seq, _AFTER[kinds[seq]]) for seq in order))
    line_of = {seq: number for number, seq in enumerate(order, start=1)}
    after_stop = next((seq for seq in range(1, len(kinds))
                       if kinds[seq - 1] == "stopped" and kinds[seq] != "started"), None)
    if after_stop is None:
        assert [e.kind for e in read_events_dir(directory)["n1"]] == kinds
    else:
        with pytest.raises(NodeEventError) as refused:
            read_events_dir(directory)
        assert str(refused.value) == (f"{directory / 'n1.jsonl'}:{line_of[after_stop]}: {kinds[after_stop]} after "
                                      f"the clean stop on line {line_of[after_stop - 1]} with no started between "
                                      "(a stopped process starts again before it emits anything)")


def test_an_event_of_a_topic_the_run_does_not_have_is_refused(tmp_path) -> None:
    """A run's topics are fixed by its configuration (no fault creates one); its partitions
    are not: an admin fault's add-partitions gives a topic more than test.yaml states."""
    path = tmp_path / "n1.jsonl"
    beyond = WRITTEN[0][0].replace('"partition":0', '"partition":7')
    offline = next(rest for rest, body in WRITTEN if isinstance(body, LogDirOffline))
    path.write_text(line(0, '"kind":"started","broker":1') + line(1, beyond) + line(2, offline))
    assert len(list(iter_events(path, topics=("t", "u")))) == 3
    with pytest.raises(NodeEventError, match=r"n1.jsonl:3: log_dir_offline names topic 'u', which the run does not "
                                             r"have \(its topics: t\)$"):
        list(iter_events(path, topics=("t",)))
    with pytest.raises(NodeEventError, match=r"n1.jsonl:2: became_leader names topic 't', which the run does not "
                                             r"have \(its topics: t0, t1\)$"):
        read_events_dir(tmp_path, topics=("t0", "t1"))


def test_an_event_file_starting_with_a_byte_order_mark_reads_as_without(tmp_path) -> None:
    path = tmp_path / "n1.jsonl"
    text = "".join(line(seq, rest) for seq, (rest, _) in enumerate(WRITTEN))
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert [e.body for e in iter_events(path)] == [body for _, body in WRITTEN]


def test_a_key_given_twice_in_an_event_is_refused_naming_it(tmp_path) -> None:
    path = tmp_path / "n1.jsonl"
    path.write_text(line(0, '"kind":"started","broker":1') + line(1, WRITTEN[0][0].replace(
        '"leader_epoch":2', '"leader_epoch":9,"leader_epoch":2')))
    with pytest.raises(NodeEventError) as refused:
        list(iter_events(path))
    assert str(refused.value) == f"{path}:2: the key 'leader_epoch' twice in one object (which one was meant cannot be told)"


def test_a_fifo_among_the_event_files_is_named_at_once(tmp_path) -> None:
    """It waited ten seconds for a writer that a run directory never has (in check and report)."""
    os.mkfifo(tmp_path / "n1.jsonl")
    started = time.monotonic()
    with pytest.raises(NodeEventError, match=r"n1\.jsonl: is a FIFO, not a file"):
        read_events_dir(tmp_path)
    refused: list[NodeEventError] = []
    assert read_events_dir(tmp_path, refused=refused) == {} and len(refused) == 1
    assert time.monotonic() - started < 2


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["absent", "directory", "file", "loop", "link-to-nothing", "link-to-directory", "unlistable"]),
       st.booleans())
def test_an_events_directory_that_is_there_is_listed_or_named_never_read_as_empty(
        tmp_path_factory: pytest.TempPathFactory, what: str, for_a_report: bool) -> None:
    """Whatever sits at events/, read_events_dir reads it or names it (for a report, in
    ``refused``): a file, a link loop or to nothing, or a directory it may not list was read
    as no node events, and check judged the run as one that recorded none (UNKNOWN, not 254)."""
    run = tmp_path_factory.mktemp("run")
    events, real = run / "events", run / "real"
    real.mkdir()
    (real / "n1.jsonl").write_text('{"node": "n1", "seq": 0, "kind": "started", "broker": 1}\n')
    if what == "directory":
        real.rename(events)
    elif what == "file":
        events.write_text("x\n")
    elif what in ("loop", "link-to-nothing", "link-to-directory"):
        events.symlink_to({"loop": events, "link-to-nothing": run / "nowhere", "link-to-directory": real}[what])
    elif what == "unlistable":
        real.rename(events)
    refused: list[NodeEventError] | None = [] if for_a_report else None
    original = os.listdir

    def listdir(path: typing.Any = ".") -> list[str]:  # root may list any directory: deny it as chmod 0 would
        if what == "unlistable" and os.fspath(path) == os.fspath(events):
            raise PermissionError(13, "Permission denied")
        return original(path)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(os, "listdir", listdir)
        try:
            read = read_events_dir(events, refused=refused)
        except NodeEventError as e:
            assert not for_a_report and what not in ("absent", "directory", "link-to-directory")
            assert str(e).startswith(f"{events}: ") and "\n" not in str(e)
            return
    if what in ("absent", "directory", "link-to-directory"):
        assert list(read) == ([] if what == "absent" else ["n1"]) and not refused
    else:
        assert for_a_report and read == {} and refused is not None and len(refused) == 1
        assert refused[0].source == str(events)
