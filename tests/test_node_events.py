import pytest

from floodmark.node_events import NodeEventError, NodeEventWriter, iter_events, read_events_dir


def test_writer_numbers_events_and_continues_after_restart(tmp_path):
    path = tmp_path / "events" / "n1.jsonl"
    w = NodeEventWriter(path, "n1")
    w.write(100.0, "became_leader", {"topic": "t0", "partition": 0, "leader_epoch": 1})
    w.write(101.0, "hw_changed", {"topic": "t0", "partition": 0, "high_watermark": 3})
    w.close()
    # A crash leaves half a line; the restarted node seals it and continues numbering.
    with open(path, "a") as f:
        f.write('{"node": "n1", "seq": 2, "ki')
    w = NodeEventWriter(path, "n1")
    assert w.seq == 2
    w.write(50.0, "started", {})
    w.close()
    events = read_events_dir(tmp_path / "events")["n1"]
    assert [e.seq for e in events] == [0, 1, 2]
    assert events[0]["leader_epoch"] == 1 and events[2].kind == "started"


def test_malformed_event_line_names_file_and_line(tmp_path):
    path = tmp_path / "n2.jsonl"
    path.write_text('{"node": "n2", "seq": 0, "kind": "started"}\nnot json\n{"node":"n2","seq":1,"kind":"x"}\n')
    with pytest.raises(NodeEventError, match="n2.jsonl:2"):
        list(iter_events(path))


def test_a_broker_without_orjson_still_writes_its_events(tmp_path):
    # The broker image is built from Debian packages, which have no orjson.
    import subprocess
    import sys

    script = (
        "import sys; sys.modules['orjson'] = None\n"
        "import floodmark.reference.real.process\n"
        "from floodmark.node_events import NodeEventWriter, iter_events\n"
        f"w = NodeEventWriter({str(tmp_path / 'n1.jsonl')!r}, 'n1')\n"
        "w.write(1.5, 'became_leader', {'topic': 't0', 'partition': 0, 'leader_epoch': 2, 'isr': (1, 2)})\n"
        "w.close()\n"
        f"print([e.kind for e in iter_events({str(tmp_path / 'n1.jsonl')!r})])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['became_leader']"
