"""FileStorage: the Storage protocol on real files, including a real ``chmod 000`` fault.

The permission test runs the broker-side code in a child process without DAC override
(``setpriv --bounding-set=-dac_override,-dac_read_search`` when we are root, as the broker
runs in the chaos clusters), because root ignores ``chmod 000``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from floodmark.reference.real.files import FileStorage


@pytest.fixture
def fs() -> FileStorage:
    return FileStorage()


def test_append_read_truncate(fs: FileStorage, tmp_path: Path) -> None:
    path = str(tmp_path / "seg")
    f = fs.open_append(path)
    f.write(b"hello world")
    f.fsync()
    assert f.size() == 11 == fs.size(path)
    assert fs.read(path) == b"hello world"
    assert fs.read(path, 6) == b"world"
    assert fs.read(path, 2, 3) == b"llo"
    assert fs.read(path, 9, 100) == b"ld"  # a read past the end is short, like os.read
    fs.truncate(path, 5)
    f.write(b"!")  # O_APPEND writes at the new end
    assert fs.read(path) == b"hello!"
    f.close()
    f.close()
    with pytest.raises(OSError) as info:
        f.write(b"x")
    assert info.value.errno == errno.EBADF


def test_directories(fs: FileStorage, tmp_path: Path) -> None:
    root = str(tmp_path)
    fs.make_dirs(f"{root}/a/b")
    fs.make_dirs(f"{root}/a/b")  # idempotent
    for name in ["z", "c", "m"]:
        fs.open_append(f"{root}/a/{name}").close()
    assert fs.list_dir(f"{root}/a") == ["b", "c", "m", "z"]
    assert fs.is_dir(f"{root}/a/b") and not fs.is_dir(f"{root}/a/c")
    assert fs.exists(f"{root}/a/c") and not fs.exists(f"{root}/a/nope")
    fs.rename(f"{root}/a/c", f"{root}/a/d")
    fs.remove(f"{root}/a/d")
    fs.remove_tree(f"{root}/a")
    assert not fs.exists(f"{root}/a")


def test_write_atomic_replaces_whole_and_leaves_no_temp_file(fs: FileStorage, tmp_path: Path) -> None:
    path = str(tmp_path / "cp")
    fs.write_atomic(path, b"first version")
    fs.write_atomic(path, b"2nd")
    assert fs.read(path) == b"2nd"
    assert os.listdir(tmp_path) == ["cp"]


def test_a_group_commit_renames_only_when_complete(fs: FileStorage, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fs.write_atomic(str(tmp_path / "a" / "cp"), b"old")
    fs.defer_syncs()
    for name in ("a", "b"):
        fs.write_atomic(str(tmp_path / name / "cp"), f"new {name}".encode())
    assert fs.read(str(tmp_path / "a" / "cp")) == b"old"  # not yet
    assert sorted(os.listdir(tmp_path / "b")) == ["cp.tmp"]
    assert fs.complete_syncs() == []
    for name in ("a", "b"):
        assert fs.read(str(tmp_path / name / "cp")) == f"new {name}".encode()
        assert os.listdir(tmp_path / name) == ["cp"]
    fs.write_atomic(str(tmp_path / "a" / "cp"), b"after")  # back to one write at a time
    assert fs.read(str(tmp_path / "a" / "cp")) == b"after"


def test_a_group_commit_names_the_path_whose_rename_failed(fs: FileStorage, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fs.defer_syncs()
    fs.write_atomic(str(tmp_path / "a" / "cp"), b"a")
    fs.write_atomic(str(tmp_path / "b" / "cp"), b"b")
    (tmp_path / "b" / "cp").mkdir()  # a rename of a file over a directory fails (EISDIR)
    failures = fs.complete_syncs()
    assert [(f.errno, f.filename) for f in failures] == [(errno.EISDIR, str(tmp_path / "b" / "cp"))]
    assert fs.read(str(tmp_path / "a" / "cp")) == b"a"
    assert os.listdir(tmp_path / "b") == ["cp"]  # the temporary file is cleaned up


def test_a_write_that_fails_in_a_group_commit_fails_at_once(fs: FileStorage, tmp_path: Path) -> None:
    fs.defer_syncs()
    with pytest.raises(FileNotFoundError):
        fs.write_atomic(str(tmp_path / "gone" / "cp"), b"b")  # no such directory
    assert fs.complete_syncs() == []


def test_errors_are_the_os_errors(fs: FileStorage, tmp_path: Path) -> None:
    root = str(tmp_path)
    fs.make_dirs(f"{root}/dir")
    with pytest.raises(FileNotFoundError):
        fs.read(f"{root}/missing")
    with pytest.raises(IsADirectoryError):
        fs.open_append(f"{root}/dir")
    fs.remove_tree(f"{root}/dir")
    fs.write_atomic(f"{root}/dir", b"now a file")  # a directory replaced by a file
    with pytest.raises(NotADirectoryError):
        fs.list_dir(f"{root}/dir")
    with pytest.raises(NotADirectoryError):
        fs.open_append(f"{root}/dir/seg")
    assert not fs.exists(f"{root}/dir/seg")


# ------------------------------------------------------------------ a real permission fault

_UNPRIVILEGED_SCRIPT = r"""
import json, os, sys
from floodmark.reference.log.log_dirs import LogDirs
from floodmark.reference.real.files import FileStorage

root = sys.argv[1]
a, b = f"{root}/a", f"{root}/b"
storage = FileStorage()
out = {}
def attempt(name, action):
    try:
        out[name] = ["ok", action()]
    except OSError as e:
        out[name] = [type(e).__name__, e.errno]

dirs = LogDirs(storage, [a, b], segment_records=2)
on_a, on_b = dirs.open_log("t0", 0), dirs.open_log("t0", 1)
on_a.append_as_leader(["a0"], 0)
on_b.append_as_leader(["b0"], 0)
os.chmod(a, 0)
try:
    attempt("append_open_segment", lambda: on_a.append_as_leader(["a1"], 0))
    attempt("flush_open_segment", lambda: on_a.flush())
    attempt("list_dir", lambda: storage.list_dir(a))
    attempt("exists_below", lambda: storage.exists(f"{a}/t0-0"))
    attempt("roll", lambda: on_a.append_as_leader(["a2"], 0))
    out["newly_offline"] = dirs.mark_offline(a, "roll failed")
    attempt("append_other_dir", lambda: on_b.append_as_leader(["b1"], 0))
    attempt("read_other_dir", lambda: [r.value for r in on_b.read(0, 10)])
    attempt("new_replica_dir", lambda: dirs.open_log("t1", 0, is_new=True).directory)
    attempt("restart_discovery", lambda: LogDirs(storage, [a, b]).online_dirs)
finally:
    os.chmod(a, 0o755)
print(json.dumps(out))
"""


def _unprivileged_command() -> list[str]:
    if os.geteuid() != 0:
        return [sys.executable]  # an ordinary user already obeys chmod
    if shutil.which("setpriv") is None:
        pytest.skip("running as root and setpriv (util-linux) is missing: cannot drop DAC override")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable]


def test_chmod_000_as_an_unprivileged_process(tmp_path: Path) -> None:
    command = [*_unprivileged_command(), "-c", _UNPRIVILEGED_SCRIPT, str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    eacces = ["PermissionError", errno.EACCES]
    assert out["append_open_segment"][0] == "ok"  # an open file keeps working
    assert out["flush_open_segment"][0] == "ok"
    assert out["list_dir"] == eacces
    assert out["exists_below"] == eacces  # not a silent "missing"
    assert out["roll"] == eacces  # the broker notices when it rolls
    assert out["newly_offline"] == [["t0", 0]]
    assert out["append_other_dir"] == ["ok", 1]
    assert out["read_other_dir"] == ["ok", ["b0", "b1"]]
    assert out["new_replica_dir"] == ["ok", f"{tmp_path}/b/t1-0"]
    assert out["restart_discovery"] == ["ok", [f"{tmp_path}/b"]]
