"""The parent side of a sweep: a worker process, a progress bar, checkpoints."""
from __future__ import annotations

import multiprocessing as mp
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from suite import environment
from suite.ceilings import Ceilings
from suite.store import RunFile
from suite.timing import Protocol
from suite.worker import Options, base_row, worker_main

START_TIMEOUT = 300.0  # seconds for a worker to import torch and the implementations


class WorkerDied(Exception):
    pass


class Worker:
    """One worker process and its end of the pipe."""

    def __init__(self, opts: Options):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, opts), daemon=True)
        self.proc.start()
        child.close()
        msg = self.recv(START_TIMEOUT)
        if msg[0] != "ready":
            raise WorkerDied(f"worker failed to start: {msg}")

    def recv(self, timeout: float) -> tuple:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            try:
                if self.conn.poll(min(left, 0.5)):
                    return self.conn.recv()
            except (EOFError, OSError):
                raise WorkerDied(self._death()) from None
            if not self.proc.is_alive() and not self.conn.poll(0):
                raise WorkerDied(self._death())

    def _death(self) -> str:
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        if code is not None and code < 0:
            import signal

            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"worker process killed by {name}"
        return f"worker process exited with code {code}"

    def send(self, msg: tuple) -> None:
        try:
            self.conn.send(msg)
        except (BrokenPipeError, OSError):
            raise WorkerDied(self._death()) from None

    def close(self, kill: bool = False) -> None:
        if self.proc.is_alive() and not kill:
            try:
                self.conn.send(("stop",))
                self.proc.join(timeout=10)
            except (BrokenPipeError, OSError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=10)


@dataclass
class Sweep:
    plan: Any
    registry: Any
    out: RunFile
    env: dict
    ceil: Ceilings
    run_id: str
    timestamp: str
    seed: int
    timeout: float
    plugins: tuple[str, ...] = ()
    protocol: Protocol = field(default_factory=Protocol)
    repeat: bool = False
    shard: str | None = None
    progress: bool = True
    worker: Worker | None = None
    # CUDA extension builds running beside the sweep (start_builds), and
    # module -> seconds its build took, charged to the compile_s of that
    # module's first timed case
    builds: Any = None
    prebuilt: dict = field(default_factory=dict)
    profile: str | None = None  # "ncu": each timed row replayed under Nsight Compute
    profile_dir: str | None = None
    _waited: set = field(default_factory=set)

    def options(self) -> Options:
        return Options(device=self.plan.device, timers=self.plan.timers, preset=self.plan.preset,
                       seed=self.seed, peaks_gbps=self.ceil.copy_gbps,
                       peaks_tflops=self.ceil.roofs(), plugins=self.plugins,
                       protocol=self.protocol, repeat=self.repeat, bandwidths=self.ceil.bandwidths(),
                       profile=self.profile, profile_dir=self.profile_dir)

    def stamp(self, row: dict) -> dict:
        """Add what the worker does not know: run identity and environment."""
        e = self.env
        sheet = self.ceil.datasheet or {}
        row.update(run_id=self.run_id, timestamp=self.timestamp, gpu_name=e["gpu_name"],
                   gpu_sms=e["gpu_sms"], driver=e["driver"], cuda=e["cuda"], torch=e["torch"],
                   triton=e["triton"], commit=e["commit"], dirty=e["dirty"], python=e["python"],
                   hostname=e["hostname"], gpu_mem_bytes=e.get("gpu_mem_bytes"),
                   l2_bytes=e.get("l2_bytes"), shard=self.shard, seed=self.seed,
                   gpu_slug=_slug(e["gpu_name"]), device=self.plan.device,
                   peak_gbps_datasheet=sheet.get("gbps"),
                   peak_tflops_datasheet=(sheet.get("tflops") or {}).get(row.get("math") or row["dtype"]),
                   sm_clock_start_mhz=e.get("clocks_start", {}).get("sm_mhz"),
                   mem_clock_start_mhz=e.get("clocks_start", {}).get("mem_mhz"))
        return row

    def _ensure_worker(self) -> Worker:
        if self.worker is None or not self.worker.proc.is_alive():
            self.worker = Worker(self.options())
        return self.worker

    def _todo(self):
        done = self.out.done_keys()
        for case, impls in self.plan.cases:
            left = [i for i in impls
                    if any((case.workload, i.name, case.dtype, case.label, t) not in done
                           for t in self.plan.timers)]
            if left:
                yield case, left

    def run_case(self, case, impls, advance) -> None:
        """All implementations of one case, surviving worker crashes and hangs."""
        opts_template = self.options()
        pending = []
        for impl in impls:
            reason = impl.check_available(self.plan.device)
            if reason:
                wl = self.registry.workloads[case.workload]
                rows = [dict(base_row(wl, case, impl.name, opts_template, impl.math), timer=t,
                             status="unavailable", error=reason) for t in self.plan.timers]
                self.out.add(self.stamp(r) for r in rows)
                advance(impl.name)
            else:
                pending.append(impl)
        while pending:
            current = None
            got = {i.name: 0 for i in pending}
            try:
                worker = self._ensure_worker()
                worker.send(("case", case, [i.name for i in pending]))
                while True:
                    msg = worker.recv(self.timeout)
                    if msg[0] == "start":
                        current = msg[1]
                    elif msg[0] == "row":
                        self.out.add([self.stamp(self._charge_build(msg[1]))])
                        got[current] += 1
                        if got[current] == len(self.plan.timers):
                            advance(current)
                            pending = [i for i in pending if i.name != current]
                    elif msg[0] == "case_done":
                        if not msg[1]:  # the worker's CUDA context is unusable: replace it
                            worker.close()
                            self.worker = None
                        break
                pending = []
            except (TimeoutError, WorkerDied) as exc:
                reason = (f"timed out after {self.timeout:.0f} s" if isinstance(exc, TimeoutError)
                          else str(exc))
                if self.worker is not None:
                    self.worker.close(kill=True)
                    self.worker = None
                victim = current if current in [i.name for i in pending] else pending[0].name
                impl = next(i for i in pending if i.name == victim)
                wl = self.registry.workloads[case.workload]
                rows = [dict(base_row(wl, case, victim, opts_template, impl.math), timer=t,
                             status="error", error=f"crashed: {reason}")
                        for t in self.plan.timers[got.get(victim, 0):]]
                self.out.add(self.stamp(r) for r in rows)
                advance(victim)
                pending = [i for i in pending if i.name != victim]

    def _charge_build(self, row: dict) -> dict:
        module = _module(self.registry.impls.get((row["workload"], row["impl"])))
        if module in self.prebuilt and row.get("compile_s") is not None:
            row["compile_s"] += self.prebuilt.pop(module)
        return row

    def _needed_builds(self, case, impls) -> list[str]:
        """Modules with a background build that this case will load."""
        if self.builds is None:
            return []
        needed = []
        for impl in impls:
            module = _module(impl)
            if module is None or module not in self.builds or module in self._waited:
                continue
            try:
                if impl.supports(case):  # a reason: this case never loads the extension
                    continue
            except Exception:  # noqa: BLE001 - the worker reports it on the row
                pass
            needed.append(module)
        return needed

    def _next_case(self, queue: list) -> tuple:
        """The first case whose extensions are built; while builds run, cases
        that need none of them go ahead of those waiting."""
        for i, (case, impls) in enumerate(queue):
            if not any(self.builds.running(m) for m in self._needed_builds(case, impls)):
                return queue.pop(i)
        return queue.pop(0)

    def _await_builds(self, case, impls) -> None:
        """Before a case that needs CUDA extensions, wait for their builds."""
        for module in self._needed_builds(case, impls):
            if self.builds.running(module):
                print(f"waiting for the CUDA build of {module}...", file=sys.stderr, flush=True)
            seconds = self.builds.wait(module)
            self._waited.add(module)
            if seconds is not None:
                self.prebuilt[module] = seconds
            else:
                why = getattr(self.builds, "failures", {}).get(module, "no time reported")
                print(f"the background CUDA build of {module} gave no build time ({why}); the case "
                      f"builds or loads it itself", file=sys.stderr, flush=True)

    def run(self) -> bool:
        """Run everything left; True when interrupted by Ctrl-C."""
        todo = list(self._todo())
        total = sum(len(impls) for _, impls in todo)
        if self.builds is None:
            self.builds = start_builds(self.plan.device, todo)
        bar = _Progress(total, enabled=self.progress)
        interrupted = False
        try:
            with bar:
                queue = list(todo)
                while queue:
                    case, impls = self._next_case(queue) if self.builds is not None else queue.pop(0)
                    bar.case(str(case))
                    self._await_builds(case, impls)
                    self.run_case(case, impls, bar.advance)
                    self.out.save()
        except KeyboardInterrupt:
            interrupted = True
        finally:
            if self.builds is not None:
                self.builds.close()
            if self.worker is not None:
                self.worker.close(kill=interrupted)
                self.worker = None
            self._finish()
        return interrupted

    def _finish(self) -> None:
        end = environment.clocks() if self.plan.device == "cuda" else {}
        for r in self.out.rows:
            if r.get("run_id") == self.run_id and r.get("sm_clock_end_mhz") is None:
                r["sm_clock_end_mhz"] = end.get("sm_mhz")
                r["mem_clock_end_mhz"] = end.get("mem_mhz")
        if self.out.rows:
            self.out.save()


def _module(impl) -> str | None:
    return getattr(getattr(impl, "fn", None), "__module__", None)


def extension_modules(impls) -> list[str]:
    """The modules behind available CUDA implementations whose ``ops()`` builds an extension."""
    modules = sorted({_module(i) for i in impls if i.backend == "cuda" and not i.check_available("cuda")}
                     - {None})
    return [m for m in modules if callable(getattr(sys.modules.get(m), "ops", None))]


def start_builds(device: str, cases):
    """Start building, in the background, every CUDA extension that the
    (case, implementations) pairs need; None when there is nothing to build."""
    if device != "cuda":
        return None
    from suite import cuda_build

    modules = extension_modules(i for _, impls in cases for i in impls)
    if not modules:
        return None
    print(f"building {len(modules)} CUDA extension(s) in the background (cached after the "
          f"first run)...", file=sys.stderr, flush=True)
    return cuda_build.Builds(modules)


def _slug(name: str) -> str:
    from suite.store import slug

    return slug(name)


class _Progress:
    """A rich progress bar with ETA, or plain lines when not on a terminal."""

    def __init__(self, total: int, enabled: bool):
        self.total = total
        self.done = 0
        self.enabled = enabled and sys.stderr.isatty()
        self.label = ""
        self.started = time.monotonic()
        self._bar = None

    def __enter__(self):
        if self.enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task("starting", total=self.total)
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def case(self, label: str) -> None:
        self.label = label
        if self._bar is not None:
            self._bar.update(self._task, description=label[:60])

    def advance(self, impl: str) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.advance(self._task)
        else:
            elapsed = time.monotonic() - self.started
            eta = elapsed / self.done * (self.total - self.done) if self.done else 0
            print(f"[{self.done}/{self.total} {elapsed:.0f}s eta {eta:.0f}s] {self.label} {impl}",
                  file=sys.stderr, flush=True)
