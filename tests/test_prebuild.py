"""Parallel extension builds before a sweep: each module in its own process, failures reported."""
import os
import time

from suite import cuda_build


def test_prebuild_runs_modules_in_parallel_and_reports_failures(tmp_path, monkeypatch):
    (tmp_path / "kspb_good_a.py").write_text(
        "import time, pathlib\n"
        f"def ops():\n    time.sleep(1.5); pathlib.Path({str(tmp_path / 'a.done')!r}).write_text('x')\n")
    (tmp_path / "kspb_good_b.py").write_text(
        "import time, pathlib\n"
        f"def ops():\n    time.sleep(1.5); pathlib.Path({str(tmp_path / 'b.done')!r}).write_text('x')\n")
    (tmp_path / "kspb_bad.py").write_text("def ops():\n    raise RuntimeError('nvcc failed')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    built = cuda_build.prebuild(["kspb_good_a", "kspb_good_b", "kspb_bad"])
    elapsed = time.perf_counter() - t0
    assert built["kspb_bad"] is None
    assert built["kspb_good_a"] >= 1.5 and built["kspb_good_b"] >= 1.5
    assert (tmp_path / "a.done").exists() and (tmp_path / "b.done").exists()
    assert elapsed < 2.9, f"the two 1.5 s builds ran one after the other ({elapsed:.1f} s)"


def test_prebuild_kills_a_build_past_its_timeout(tmp_path, monkeypatch):
    (tmp_path / "kspb_slow.py").write_text("import time\ndef ops():\n    time.sleep(30)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    t0 = time.perf_counter()
    assert cuda_build.prebuild(["kspb_slow"], timeout=1.0) == {"kspb_slow": None}
    assert time.perf_counter() - t0 < 10


def test_a_build_waited_for_late_is_charged_its_own_duration(tmp_path, monkeypatch):
    (tmp_path / "kspb_quick.py").write_text("import time\ndef ops():\n    time.sleep(0.5)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    builds = cuda_build.Builds(["kspb_quick"])
    assert "kspb_quick" in builds and "other" not in builds
    time.sleep(3.0)  # the caller was busy with other cases meanwhile
    assert not builds.running("kspb_quick")
    seconds = builds.wait("kspb_quick")
    assert 0.5 <= seconds < 2.5, seconds  # the build's own time (plus start-up), not the 3 s wait
    assert builds.wait("kspb_quick") == seconds and builds.wait("never_started") is None


def test_close_stops_builds_still_running(tmp_path, monkeypatch):
    (tmp_path / "kspb_long.py").write_text("import time\ndef ops():\n    time.sleep(30)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    builds = cuda_build.Builds(["kspb_long"])
    t0 = time.perf_counter()
    builds.close()
    assert time.perf_counter() - t0 < 5 and builds.wait("kspb_long") is None


class _FakeBuilds:
    def __init__(self, running):
        self._running = set(running)

    def __contains__(self, module):
        return True

    def running(self, module):
        return module in self._running

    def wait(self, module):
        self._running.discard(module)
        return 1.0


class _Impl:
    def __init__(self, module, reason=None):
        self.fn = type("F", (), {"__module__": module})()
        self._reason = reason

    def supports(self, case):
        return self._reason


def test_cases_needing_a_running_build_wait_behind_cases_that_need_none():
    from suite.sweep import Sweep

    sweep = Sweep(plan=None, registry=None, out=None, env={}, ceil=None, run_id="r", timestamp="t",
                  seed=0, timeout=1.0, builds=_FakeBuilds(running={"ext_a"}))
    queue = [("case1", [_Impl("ext_a")]),
             ("case2", [_Impl("ext_a", reason="float32 is not supported")]),  # never loads it
             ("case3", [_Impl("ext_b")])]
    order = []
    while queue:
        case, impls = sweep._next_case(queue)
        sweep._await_builds(case, impls)
        order.append(case)
    # case2 and case3 went ahead; once the queue held only case1 it waited for ext_a
    assert order == ["case2", "case3", "case1"]
    assert sweep.prebuilt == {"ext_a": 1.0, "ext_b": 1.0}


def test_a_failed_build_says_why(tmp_path, monkeypatch):
    (tmp_path / "kspb_broken.py").write_text(
        "import sys\ndef ops():\n    print('nvcc: error in gelu.cu', file=sys.stderr); raise SystemExit(3)\n")
    (tmp_path / "kspb_crash_after.py").write_text(
        "import atexit, os\ndef ops():\n    atexit.register(lambda: os._exit(7))\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    builds = cuda_build.Builds(["kspb_broken", "kspb_crash_after"])
    assert builds.wait("kspb_broken") is None
    assert "exit status 3" in builds.failures["kspb_broken"] and "nvcc: error" in builds.failures["kspb_broken"]
    # built, then a non-zero exit status at shutdown: the build time still counts
    assert builds.wait("kspb_crash_after") is not None and "kspb_crash_after" not in builds.failures
