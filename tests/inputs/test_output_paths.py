"""Writing where the user said: refused over a directory or an input, written through a
device or FIFO, replaced atomically otherwise, and a clean one-line error when it cannot be.

Never against the machine's own /dev/null or /dev/full: the devices and FIFOs written
through here are made in the test's directory.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import pytest
from fifo_fixtures import FifoReader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from floodmark.errors import UsageError
from floodmark.inputs import output_paths
from floodmark.inputs.output_paths import check_output, write_output


def _text(text: str) -> Callable[[TextIO], object]:
    """A writer for write_output that writes ``text``."""
    return lambda f: f.write(text)


def _only_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_an_existing_directory_is_refused_and_left_empty(tmp_path: Path) -> None:
    target = tmp_path / "events"
    target.mkdir()
    with pytest.raises(UsageError) as e:
        write_output(target, _text("x"), flag="--out")
    assert str(e.value) == f"--out {target}: is a directory"
    assert _only_files(target) == [] and _only_files(tmp_path) == ["events"]


def test_the_input_itself_is_refused_and_kept(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    history.write_bytes(b'{"index": 0}\n')
    with pytest.raises(UsageError) as e:
        write_output(history, _text("EDN"), flag="--to-edn", inputs=[history])
    assert str(e.value) == f"--to-edn {history}: is the input {history}; it would be overwritten"
    assert history.read_bytes() == b'{"index": 0}\n'
    assert _only_files(tmp_path) == ["history.jsonl"]  # no temporary file left either


def test_a_symbolic_link_to_an_input_is_refused(tmp_path: Path) -> None:
    history = tmp_path / "run" / "history.jsonl"
    history.parent.mkdir()
    history.write_text("keep\n")
    link = tmp_path / "out.html"
    link.symlink_to(history)
    chain = tmp_path / "chain.html"
    chain.symlink_to(link)  # links to links are followed too
    for target in (link, chain):
        with pytest.raises(UsageError, match="is the input .*history.jsonl; it would be overwritten"):
            write_output(target, _text("<html>"), flag="--out", inputs=[history])
    assert history.read_text() == "keep\n" and link.is_symlink()


def test_a_hard_link_to_an_input_is_refused(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    history.write_text("keep\n")
    hard = tmp_path / "another-name.jsonl"
    os.link(history, hard)
    with pytest.raises(UsageError, match="is the input"):
        write_output(hard, _text("x"), flag="--out", inputs=[history])
    assert history.read_text() == "keep\n" == hard.read_text()


def test_an_input_read_from_a_descriptor_is_refused(tmp_path: Path) -> None:
    history = tmp_path / "h.jsonl"
    history.write_text("keep\n")
    with open(history) as stdin, pytest.raises(UsageError, match="is the input standard input"):
        write_output(history, _text("x"), flag="--to-edn", inputs=[stdin.fileno()])
    assert history.read_text() == "keep\n"


def test_an_input_that_is_not_there_refuses_nothing(tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    assert write_output(target, _text("page"), inputs=[tmp_path / "schedule.json"]) == target
    assert target.read_text() == "page"


def test_a_fifo_is_written_through_to_its_reader_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = FifoReader(tmp_path / "pipe")
    text = "<html>" + "x" * 200_000 + "</html>\n"  # more than a pipe holds: a blocking write
    assert write_output(fifo.path, _text(text), flag="--out") == fifo.path
    assert fifo.join(timeout=10) == text.encode()
    assert stat.S_ISFIFO(os.lstat(fifo.path).st_mode)
    assert _only_files(tmp_path) == ["pipe"]


def test_a_fifo_nobody_reads_is_refused_not_waited_on_for_ever(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(output_paths, "READER_WAIT", 0.1)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UsageError) as e:
        write_output(fifo, _text("x"), flag="--out")
    assert str(e.value) == f"--out {fifo}: a FIFO no one reads (waited 0.1 s)"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_character_device_is_written_through_never_replaced(tmp_path: Path) -> None:
    node = tmp_path / "null"  # a null device of our own, not the machine's /dev/null
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    assert write_output(node, _text("page"), flag="--out") == node
    assert stat.S_ISCHR(os.lstat(node).st_mode) and os.lstat(node).st_rdev == os.makedev(1, 3)
    assert _only_files(tmp_path) == ["null"]


def test_a_socket_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # (a socket's path must be short)
    with socket.socket(socket.AF_UNIX) as s:
        s.bind("sock")
        with pytest.raises(UsageError, match=r"^--out sock: is a socket, not a file$"):
            write_output("sock", _text("x"), flag="--out")
    assert stat.S_ISSOCK(os.lstat(tmp_path / "sock").st_mode)


def test_a_regular_file_is_replaced_atomically_keeping_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old report")
    target.chmod(0o640)
    before = os.stat(target).st_ino
    seen: list[str] = []

    def write(f: TextIO) -> None:
        f.write("new ")
        f.flush()
        seen.append(target.read_text())  # mid-write, a reader still sees the old file whole
        f.write("report")

    write_output(target, write, flag="--out")
    assert seen == ["old report"]
    assert target.read_text() == "new report"
    assert os.stat(target).st_ino != before  # renamed into place, not written over in place
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert _only_files(tmp_path) == ["report.html"]


def test_a_new_file_gets_the_usual_permissions(tmp_path: Path) -> None:
    target = tmp_path / "new.edn"
    write_output(target, _text("{}\n"))
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~mask


def test_a_writer_that_fails_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old report")

    def write(f: TextIO) -> None:
        f.write("half")
        raise RuntimeError("rendering broke")

    with pytest.raises(RuntimeError):
        write_output(target, write)
    assert target.read_text() == "old report"
    assert _only_files(tmp_path) == ["report.html"]


def test_a_symbolic_link_elsewhere_is_kept_and_its_file_replaced(tmp_path: Path) -> None:
    real = tmp_path / "reports" / "latest.html"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "report.html"
    link.symlink_to(real)
    write_output(link, _text("new"), flag="--out")
    assert link.is_symlink() and real.read_text() == "new"


def test_a_missing_directory_or_a_file_in_its_place_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "r.html"
    with pytest.raises(UsageError) as e:
        write_output(missing, _text("x"), flag="--out")
    assert str(e.value) == f"--out {missing}: {missing.parent}: no such directory"
    a_file = tmp_path / "a-file"
    a_file.write_text("keep")
    with pytest.raises(UsageError) as e:
        check_output(a_file / "r.html", flag="--out")
    assert str(e.value) == f"--out {a_file / 'r.html'}: {a_file}: is a file, not a directory"
    assert a_file.read_text() == "keep" and not missing.parent.exists()


def test_a_directory_it_may_not_write_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The tests run as root, whom a directory's mode does not stop: the kernel's refusal is
    # stood in for where the temporary file is made.
    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(UsageError, match=r"^--out .*r.html: cannot write: permission denied$"):
        write_output(tmp_path / "r.html", _text("x"), flag="--out")
    assert list(tmp_path.iterdir()) == []


def test_a_default_path_is_named_without_a_flag(tmp_path: Path) -> None:
    (tmp_path / "report.html").mkdir()
    with pytest.raises(UsageError) as e:
        check_output(tmp_path / "report.html")
    assert str(e.value) == f"{tmp_path / 'report.html'}: is a directory"


def test_a_name_with_a_newline_is_refused_in_one_line(tmp_path: Path) -> None:
    odd = tmp_path / "a\nb"
    odd.mkdir()
    with pytest.raises(UsageError) as e:
        check_output(odd, flag="--out")
    assert "\n" not in str(e.value) and str(e.value).endswith("a\\nb: is a directory")


_names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"),
                 min_size=1, max_size=40).filter(lambda n: n not in (".", ".."))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=_names, content=st.text(max_size=2000), existed=st.booleans())
def test_what_is_written_is_exactly_what_is_read_back_and_nothing_else_is_left(
        tmp_path: Path, name: str, content: str, existed: bool) -> None:
    directory = tmp_path / "d"
    directory.mkdir(exist_ok=True)
    for leftover in directory.iterdir():
        leftover.unlink()
    target = directory / name
    if existed:
        target.write_text("previous")
    write_output(target, _text(content), flag="--out")
    assert target.read_bytes() == content.encode()
    assert _only_files(directory) == [name]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inputs=st.lists(_names, min_size=1, max_size=5, unique=True), data=st.data())
def test_any_way_of_naming_an_input_is_refused_and_the_input_kept(tmp_path: Path, inputs: list[str],
                                                                  data: st.DataObject) -> None:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    for old in (*run.iterdir(), *(p for p in tmp_path.iterdir() if p != run)):
        old.unlink()
    for i, name in enumerate(inputs):
        (run / name).write_text(f"input {i}\n")
    victim = data.draw(st.sampled_from(inputs))
    how = data.draw(st.sampled_from(["itself", "symlink", "hard link", "relative"]))
    target: Path | str = run / victim
    if how == "symlink":
        target = tmp_path / "link"
        target.symlink_to(run / victim)
    elif how == "hard link":
        target = tmp_path / "hard"
        os.link(run / victim, target)
    elif how == "relative":
        target = os.path.relpath(run / victim)
    with pytest.raises(UsageError, match="it would be overwritten$"):
        write_output(target, _text("clobbered"), flag="--out", inputs=[run / n for n in inputs])
    assert [(run / n).read_text() for n in inputs] == [f"input {i}\n" for i in range(len(inputs))]
    assert sorted(p.name for p in run.iterdir()) == sorted(inputs)


def test_dash_is_standard_output_and_never_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    check_output("-", flag="--out")  # nothing to refuse
    assert write_output("-", lambda f: f.write("é\n"), flag="--out") == Path("-")
    assert capsys.readouterr().out == "é\n"
    assert list(tmp_path.iterdir()) == []
