import os
from pathlib import Path

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


def test_runs_finishing_at_once_all_point_latest_without_tripping(tmp_path: Path) -> None:
    # explore --jobs: several runs of one store finish together; none may fail on the link.
    import threading

    from floodmark.rundir import LATEST, update_latest

    runs = [tmp_path / f"t/2026-s{i}" for i in range(8)]
    for run in runs:
        run.mkdir(parents=True)
    errors: list[BaseException] = []

    def finish(run: Path) -> None:
        try:
            for _ in range(100):
                update_latest(tmp_path, run)
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=finish, args=(run,)) for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert (tmp_path / LATEST).resolve() in {r.resolve() for r in runs}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
