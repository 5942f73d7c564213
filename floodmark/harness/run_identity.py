"""A run's id: the name its node events carry, so that another run's are told from its own.

The runner gives each run one before it writes ``test.yaml`` (its ``run_id``) and starts
the brokers with it; each names it in its ``started`` events, and readers hold the events
to it (:mod:`floodmark.contracts.run_ids`). How it is made depends on whether the backend
replays a run byte for byte:

- on the simulator, a digest of the seed, the test's settings and its fault schedule
  (:func:`derived_run_id`). A simulated run is a pure function of these and the code, and
  its replay (``floodmark repro``, ``run -f RUN/test.yaml --schedule RUN/schedule.json``)
  must write the very same bytes, ``started`` events included, whatever its directory, its
  time or ``PYTHONHASHSEED``: the id can depend on nothing else. Two runs with one id wrote
  the same events, so nothing is lost by not telling them apart. What a run only records is
  left out (``code_version``, and the id itself): a replay on a later commit that changed
  nothing it runs must stay identical, as ``repro`` compares the history and events, not
  ``test.yaml``. A shrunk schedule is another run, with another id.
- on real clusters, 64 random bits (:func:`random_run_id`). A real run is no function of
  its inputs: two runs of one seed, test and schedule write different events, and an id
  derived from those would call them one run, the very copy the id is there to catch. The
  time would not tell them apart either (two machines, one second). With 64 bits, two of
  100,000 runs share an id with a chance of about 3 in 10^10.

The cluster's resources (containers, network namespaces, interfaces) are named by the id's
first characters (:func:`resource_id`), as a short commit hash names a commit: Linux limits
an interface's name to 15 characters.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
from typing import Any

from floodmark.contracts.run_config import TestConfig
from floodmark.harness.schedule import Schedule

ID_DIGITS = 16  # hexadecimal: 64 bits
RESOURCE_DIGITS = 6  # what the cluster's resources are named by (ClusterSpec.run_id)
# Settings a run records of itself rather than runs: not part of what it is.
RECORDED_ONLY = ("code_version", "run_id")


def run_id_for(config: TestConfig, schedule: Schedule, deterministic: bool) -> str:
    """The id of a run of ``config`` and ``schedule`` on a backend that is ``deterministic``
    (replays byte for byte) or not (see the module)."""
    return derived_run_id(config, schedule) if deterministic else random_run_id()


def derived_run_id(config: TestConfig, schedule: Schedule) -> str:
    """The id of a deterministic run: a digest of its seed, settings and planned faults."""
    settings = {f.name: _as_typed(f, getattr(config, f.name)) for f in dataclasses.fields(config)
                if f.name not in RECORDED_ONLY}
    text = json.dumps({"settings": settings, "schedule": schedule.to_dict()}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:ID_DIGITS]


def _as_typed(f: dataclasses.Field[Any], value: Any) -> Any:
    """``value`` as its setting's type writes it: a whole number in a setting of seconds is
    a float, as ``test.yaml`` reads back (a test made in code may say 5 for 5.0)."""
    if isinstance(f.default, float) and type(value) is int:
        return float(value)
    if isinstance(f.default, tuple) and all(isinstance(d, float) for d in f.default) and f.default:
        return [float(v) if type(v) is int else v for v in value]
    return list(value) if isinstance(value, tuple) else value


def random_run_id() -> str:
    """The id of a run on a real cluster: random (see the module)."""
    return secrets.token_hex(ID_DIGITS // 2)


def resource_id(run_id: str) -> str:
    """What the run's cluster resources are named by: the id's first characters."""
    return run_id[:RESOURCE_DIGITS]
