import os

from floodmark.rundir import create_run_dir, find_run_dirs, safe_name


def test_run_dirs_are_laid_out_and_latest_follows(tmp_path):
    first = create_run_dir(tmp_path, "queue all/docker", 7)
    first.history.write_text("")
    second = create_run_dir(tmp_path, "queue all/docker", 8)
    second.history.write_text("")
    assert first.path != second.path
    assert first.events.is_dir() and first.logs.is_dir()
    assert first.path.name.endswith("-s7") and first.test_name == safe_name("queue all/docker")
    assert os.path.realpath(tmp_path / "latest") == str(second.path.resolve())
    assert [r.path for r in find_run_dirs(tmp_path)][0] == second.path
