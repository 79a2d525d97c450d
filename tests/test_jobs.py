"""A job's key (attndyn.jobs.key_of): what decides a result decides its key; a job's
``after``: it starts once the jobs it names are done."""
import numpy as np
import pytest

from attndyn import jobs


def test_equal_parts_give_equal_keys_and_any_change_a_new_one():
  parts = ({"lr": 0.1, "seeds": 3}, "bucket-0", [1, 2.5, None])
  assert jobs.key_of(*parts) == jobs.key_of(*parts)
  assert jobs.key_of(*parts) != jobs.key_of({"lr": 0.2, "seeds": 3}, "bucket-0", [1, 2.5, None])
  assert jobs.key_of(*parts) != jobs.key_of(*parts[:2])


@pytest.mark.parametrize("other", [
    np.array([0.0, 1.0, 2.5]),                       # one value differs
    np.array([0.0, 1.0, 2.0], dtype=np.float32),     # same values, another dtype
    np.array([[0.0, 1.0, 2.0]]),                     # same values, another shape
])
def test_an_array_part_counts_by_its_values_dtype_and_shape(other):
  # An array among the parts must not collapse to a placeholder: two different arrays
  # sharing a key would let --resume hand back the result of other inputs.
  a = np.array([0.0, 1.0, 2.0])
  assert jobs.key_of({"x": a}) == jobs.key_of({"x": a.copy()})
  assert jobs.key_of({"x": a}) != jobs.key_of({"x": other})


def test_code_false_leaves_the_revision_out(monkeypatch):
  with_code, without = jobs.key_of("p"), jobs.key_of("p", code=False)
  monkeypatch.setitem(jobs._REVISION, "value", {"commit": "0" * 40, "dirty": False})
  monkeypatch.setitem(jobs._REVISION, "changes", "another edit")
  assert jobs.key_of("p", code=False) == without
  assert jobs.key_of("p") != with_code


def test_outside_a_checkout_the_source_itself_keys_the_jobs(monkeypatch):
  # no git (a copied tree, an unpacked archive): the key must still change with the code
  import subprocess
  from pathlib import Path

  def no_git(*args, **kwargs):
    raise FileNotFoundError("git")

  monkeypatch.setattr(subprocess, "run", no_git)
  monkeypatch.setattr(jobs, "_REVISION", {})
  assert jobs.revision() is None
  key = jobs.key_of("p")
  monkeypatch.setattr(jobs, "_REVISION", {})
  assert jobs.revision() is None and jobs.key_of("p") == key   # the same source, the same key
  read = Path.read_bytes
  edited = lambda path: read(path) + (b"# edited\n" if path.name == "lu.py" else b"")
  monkeypatch.setattr(Path, "read_bytes", edited)
  monkeypatch.setattr(jobs, "_REVISION", {})
  assert jobs.revision() is None and jobs.key_of("p") != key


def test_a_scheduler_address_that_accepts_and_never_answers_is_one_error(monkeypatch):
  # a port that accepts connections and never speaks (another service, a stalled host):
  # the command says so once the wait is over, instead of waiting for ever
  import socket
  import time

  from attndyn.tasks.errors import ConfigError
  silent = socket.socket()
  silent.bind(("127.0.0.1", 0))
  silent.listen(4)
  monkeypatch.setattr(jobs, "CONNECT_SECONDS", 2)
  address = "tcp://127.0.0.1:%d" % silent.getsockname()[1]
  t0 = time.monotonic()
  try:
    with pytest.raises(ConfigError, match="no Dask scheduler answers there"):
      with jobs.cluster(scheduler=address):
        pass
  finally:
    silent.close()
  assert time.monotonic() - t0 < 30


# -- a job's `after`: it starts once the jobs it names are done --------------------------------

_STARTED = []


def _job(name: str, seconds: float) -> dict:
  import time
  _STARTED.append(("start", name))
  time.sleep(seconds)
  _STARTED.append(("end", name))
  return {"name": name}


def _study(tmp_path):
  # "uses" comes first and runs first by priority, but reuses what "made" leaves
  return [jobs.Job("uses", _job, ("uses", 0.0), "k-uses", priority=1.0, after=("made",)),
          jobs.Job("made", _job, ("made", 0.5), "k-made"),
          jobs.Job("other", _job, ("other", 0.0), "k-other")]


def _starts_after_end(order, job, before):
  return order.index(("start", job)) > order.index(("end", before))


def test_one_worker_runs_a_job_after_the_jobs_it_names(tmp_path):
  _STARTED.clear()
  done = jobs.execute(_study(tmp_path), jobs.Store(tmp_path / "store"))
  assert sorted(done.results) == ["made", "other", "uses"] and not done.failed
  assert _starts_after_end(_STARTED, "uses", "made")


def test_on_a_cluster_a_job_starts_after_the_jobs_it_names(tmp_path):
  import distributed
  _STARTED.clear()
  # two workers: without `after`, "uses" (the highest priority) would start beside "made"
  with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                dashboard_address="127.0.0.1:0") as cluster:
    with distributed.Client(cluster) as client:
      done = jobs.execute(_study(tmp_path), jobs.Store(tmp_path / "store"), client=client)
  assert sorted(done.results) == ["made", "other", "uses"] and not done.failed
  assert _starts_after_end(_STARTED, "uses", "made")


def test_a_job_named_but_not_run_now_is_not_waited_for(tmp_path):
  _STARTED.clear()
  done = jobs.execute(_study(tmp_path)[:1], jobs.Store(tmp_path / "store"))
  assert list(done.results) == ["uses"]


def test_jobs_that_wait_for_each_other_are_one_error(tmp_path):
  import distributed

  from attndyn.tasks.errors import ConfigError
  study = [jobs.Job("a", _job, ("a", 0.0), "k-a", after=("b",)),
           jobs.Job("b", _job, ("b", 0.0), "k-b", after=("a",))]
  with pytest.raises(ConfigError, match="wait for each other"):
    jobs.execute(study, jobs.Store(tmp_path / "store"))
  with distributed.Client(processes=False, n_workers=1, dashboard_address="127.0.0.1:0") as client:
    with pytest.raises(ConfigError, match="wait for each other"):   # on a cluster too
      jobs.execute(study, jobs.Store(tmp_path / "store"), client=client)


# -- the order jobs start in on a cluster --------------------------------------------------------

def test_a_job_others_wait_for_starts_before_higher_priorities():
  study = [jobs.Job("high", _job, (), "k1", priority=5.0),
           jobs.Job("low", _job, (), "k2", priority=1.0),
           jobs.Job("reuses", _job, (), "k3", priority=0.0, after=("low",)),
           jobs.Job("mid", _job, (), "k4", priority=3.0)]
  ranks = jobs._ranks(study)
  assert sorted(ranks, key=ranks.get, reverse=True) == ["low", "high", "mid", "reuses"]


def test_no_worker_idles_while_a_job_waits_in_another_workers_queue(tmp_path):
  # One long job first, then short ones: on two one-thread workers the second takes every
  # short job in turn while the first runs the long one. Dask's default hands each worker a
  # second job to queue as it is submitted, so a short job would wait behind the long one.
  import dask
  import distributed
  _STARTED.clear()
  study = [jobs.Job("long", _job, ("long", 1.5), "k-long", priority=10.0)]
  study += [jobs.Job(f"short{i}", _job, (f"short{i}", 0.05), f"k-short{i}", priority=5.0 - i)
            for i in range(6)]
  with dask.config.set(jobs.SCHEDULER_CONFIG):
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address="127.0.0.1:0") as cluster:
      with distributed.Client(cluster) as client:
        done = jobs.execute(study, jobs.Store(tmp_path / "store"), client=client)
  assert not done.failed and len(done.results) == 7
  ends = [_STARTED.index(("end", job.name)) for job in study]
  assert all(end < ends[0] for end in ends[1:]), _STARTED
