"""The parent side of a sweep: worker processes, a progress bar, checkpoints.

A plain run has one slot: one worker on the run's device, cases in plan
order.  A run with ``--gpus`` has one slot per listed index, each served by a
thread of the parent that owns one worker process on that GPU: the threads
pull cases from one queue, most expensive first by suite.scheduling's
estimate, so a GPU that finishes early takes the next case, and every row
goes into the one run file under a lock.  Each slot's first worker describes
its own device and measures (or loads) its ceilings; a second slot on the same
GPU waits for them and uses them, so two workers never measure one GPU at
once.  A slot whose worker cannot start gives its case back to the queue and
stops, unless it is the last one left.
"""
from __future__ import annotations

import functools
import multiprocessing as mp
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from suite import environment, scheduling
from suite.ceilings import Ceilings
from suite.resume import ceilings_json
from suite.store import RunFile
from suite.timing import Protocol
from suite.worker import Options, base_row, with_ceilings, worker_main

START_TIMEOUT = 300.0  # seconds for a worker to import torch and the implementations


class WorkerDied(Exception):
    pass


class StartFailed(WorkerDied):
    """A worker that never became ready."""


class SlotLost(Exception):
    """A slot of --gpus whose worker cannot start: its case goes back to the queue."""

    def __init__(self, pending: list, reason: str):
        super().__init__(reason)
        self.pending = pending


class Worker:
    """One worker process and its end of the pipe."""

    def __init__(self, opts: Options):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker_main, args=(child, opts), daemon=True)
        self.proc.start()
        child.close()
        try:
            msg = self.recv(START_TIMEOUT)
        except (TimeoutError, WorkerDied) as exc:
            self.close(kill=True)
            raise StartFailed(f"worker failed to start: {exc or 'no answer'}") from None
        if msg[0] != "ready":
            self.close(kill=True)
            raise StartFailed(f"worker failed to start: {msg}")
        self.info = msg[1] if len(msg) > 1 else {}  # its device and ceilings (--gpus)

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
class Slot:
    """One worker's place: the GPU its rows record, its device's ceilings and description."""

    index: int | None  # the rows' device_index
    visible: str | None = None  # CUDA_VISIBLE_DEVICES of its worker (--gpus); None: a plain run
    ceil: Ceilings | None = None  # None until its first worker has measured them
    env: dict = field(default_factory=dict)  # its device's description, over the run's
    leader: "Slot | None" = None  # the first slot on the same GPU, which measures the ceilings
    worker: Worker | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    retired: bool = False


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
    reuse_ceilings: bool = False
    slots: list = field(default_factory=list)  # Slot; none given: one plain slot
    # CUDA extension builds running beside the sweep (start_builds), and
    # module -> seconds its build took, charged to the compile_s of that
    # module's first timed case
    builds: Any = None
    prebuilt: dict = field(default_factory=dict)
    profile: str | None = None  # "ncu": each timed row replayed under Nsight Compute
    profile_dir: str | None = None
    energy: bool = False  # joules a call on every timed row (suite.energy)
    _waited: set = field(default_factory=set)

    def __post_init__(self):
        if not self.slots:
            self.slots = [Slot(index=None, ceil=self.ceil)]
        self._lock = threading.RLock()  # the queue, the run file, the progress bar
        self._build_lock = threading.Lock()
        self._stopping = False
        self._errors: list[BaseException] = []

    @functools.cached_property
    def _warm_compile(self) -> bool:
        """Workers start Inductor's compile pool when the plan has torch.compile rows."""
        return self.plan.device == "cuda" and any(
            i.backend == "compile" for _, impls in self.plan.cases for i in impls)

    @property
    def multi(self) -> bool:
        return any(s.visible is not None for s in self.slots)

    def options(self, slot: Slot | None = None) -> Options:
        slot = slot or self.slots[0]
        opts = Options(device=self.plan.device, timers=self.plan.timers, preset=self.plan.preset,
                       seed=self.seed, peaks_gbps=float("nan"), peaks_tflops={}, plugins=self.plugins,
                       protocol=self.protocol, repeat=self.repeat, visible_devices=slot.visible,
                       describe=slot.visible is not None and not slot.env,
                       own_ceilings=None if slot.ceil else f"gpu{slot.index}",
                       reuse_ceilings=self.reuse_ceilings, profile=self.profile,
                       profile_dir=self.profile_dir, energy=self.energy,
                       warm_compile=self._warm_compile)
        return with_ceilings(opts, slot.ceil) if slot.ceil else opts

    def stamp(self, row: dict, slot: Slot | None = None) -> dict:
        """Add what the worker does not know: run identity, its GPU, environment and ceilings."""
        slot = slot or self.slots[0]
        e = {**self.env, **slot.env}
        ceil = slot.ceil or self.ceil
        sheet = (ceil.datasheet if ceil else None) or {}
        row.update(device_index=slot.index, ceilings=ceilings_json(ceil) if ceil else None)
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

    def _ensure_worker(self, slot: Slot) -> Worker:
        if slot.worker is None or not slot.worker.proc.is_alive():
            slot.worker = Worker(self.options(slot))
            self._adopt(slot, slot.worker.info)
        return slot.worker

    def _adopt(self, slot: Slot, info: dict) -> None:
        """Keep what a worker of --gpus reported: its device, and the ceilings it measured."""
        if info.get("env"):
            slot.env = info["env"]
        if info.get("ceilings") and slot.ceil is None:
            slot.ceil = c = Ceilings(**info["ceilings"])
            print(f"GPU {slot.index} ({c.gpu_name}): ceilings copy {c.copy_gbps:.0f} GB/s, matmul "
                  + ", ".join(f"{k} {v:.3g}" for k, v in c.matmul_tflops.items()) + " TFLOP/s",
                  file=sys.stderr, flush=True)

    def _add(self, rows) -> None:
        with self._lock:
            self.out.add(rows)

    def _retire(self, slot: Slot) -> bool:
        """Take ``slot`` out of the run, unless it is the last one left."""
        with self._lock:
            if sum(not s.retired for s in self.slots) <= 1:
                return False
            slot.retired = True
            return True

    def _todo(self):
        done = self.out.done_keys()
        for case, impls in self.plan.cases:
            left = [i for i in impls
                    if any((case.workload, i.name, case.dtype, case.label, t) not in done
                           for t in self.plan.timers)]
            if left:
                yield case, left

    def run_case(self, case, impls, advance, slot: Slot | None = None) -> None:
        """All implementations of one case, surviving worker crashes and hangs."""
        slot = slot or self.slots[0]
        pending = []
        for impl in impls:
            reason = impl.check_available(self.plan.device)
            if reason:
                wl = self.registry.workloads[case.workload]
                rows = [dict(base_row(wl, case, impl.name, self.options(slot), impl.math), timer=t,
                             status="unavailable", error=reason) for t in self.plan.timers]
                self._add([self.stamp(r, slot) for r in rows])
                advance(impl.name)
            else:
                pending.append(impl)
        while pending:
            current = None
            got = {i.name: 0 for i in pending}
            try:
                try:
                    worker = self._ensure_worker(slot)
                except StartFailed as exc:
                    if self.multi and self._retire(slot):
                        raise SlotLost(pending, str(exc)) from None
                    raise
                worker.send(("case", case, [i.name for i in pending]))
                while True:
                    msg = worker.recv(self.timeout)
                    if msg[0] == "start":
                        current = msg[1]
                    elif msg[0] == "row":
                        self._add([self.stamp(self._charge_build(msg[1]), slot)])
                        got[current] += 1
                        if got[current] == len(self.plan.timers):
                            advance(current)
                            pending = [i for i in pending if i.name != current]
                    elif msg[0] == "case_done":
                        if not msg[1]:  # the worker's CUDA context is unusable: replace it
                            worker.close()
                            slot.worker = None
                        break
                pending = []
            except (TimeoutError, WorkerDied) as exc:
                if self._stopping:  # Ctrl-C killed the worker: the case is left for --resume
                    return
                reason = (f"timed out after {self.timeout:.0f} s" if isinstance(exc, TimeoutError)
                          else str(exc))
                if slot.worker is not None:
                    slot.worker.close(kill=True)
                    slot.worker = None
                victim = current if current in [i.name for i in pending] else pending[0].name
                impl = next(i for i in pending if i.name == victim)
                wl = self.registry.workloads[case.workload]
                rows = [dict(base_row(wl, case, victim, self.options(slot), impl.math), timer=t,
                             status="error", error=f"crashed: {reason}")
                        for t in self.plan.timers[got.get(victim, 0):]]
                self._add([self.stamp(r, slot) for r in rows])
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
                if self.multi:
                    interrupted = self._run_slots(self.by_cost(todo), bar)
                else:
                    self._serve(self.slots[0], list(todo), bar)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self._stopping = self._stopping or interrupted
            if self.builds is not None:
                self.builds.close()
            for slot in self.slots:
                if slot.worker is not None:
                    slot.worker.close(kill=interrupted)
                    slot.worker = None
            self._finish()
        if self._errors:
            raise self._errors[0]
        return interrupted

    def by_cost(self, todo: list) -> list:
        """``todo`` most expensive first, by suite.scheduling's estimate."""
        known = next((s.ceil for s in self.slots if s.ceil), self.ceil)
        rates = scheduling.Rates.for_device(self.plan.device, known, self.env.get("gpu_name", ""))
        timers = len(self.plan.timers)

        def cost(item):
            case, impls = item
            return scheduling.case_s(self.registry.workloads[case.workload], case,
                                     [i.name for i in impls], rates, self.protocol, timers)
        return scheduling.by_cost(todo, cost)

    def _run_slots(self, queue: list, bar) -> bool:
        """One thread per slot, all pulling from ``queue``; True when interrupted by Ctrl-C."""
        threads = [threading.Thread(target=self._serve_guarded, args=(slot, queue, bar), daemon=True,
                                    name=f"gpu{slot.index}") for slot in self.slots]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.5)
        except KeyboardInterrupt:
            self._stopping = True
            for slot in self.slots:  # each thread sees its worker die and stops
                if slot.worker is not None:
                    slot.worker.close(kill=True)
            for t in threads:
                t.join(30)
            return True
        return False

    def _serve_guarded(self, slot: Slot, queue: list, bar) -> None:
        try:
            self._start_slot(slot)
            self._serve(slot, queue, bar)
        except BaseException as exc:  # noqa: BLE001 - a bug here is raised in the main thread
            self._errors.append(exc)
            self._stopping = True
        finally:
            slot.ready.set()

    def _start_slot(self, slot: Slot) -> None:
        """A slot sharing a GPU takes its leader's ceilings; a slot that cannot start retires."""
        if slot.leader is not None:
            slot.leader.ready.wait()
            slot.ceil = slot.ceil or slot.leader.ceil
        try:
            self._ensure_worker(slot)
        except StartFailed as exc:
            if self._retire(slot):
                print(f"GPU {slot.index}: {exc}; its share goes to the other GPUs", file=sys.stderr,
                      flush=True)
        slot.ready.set()

    def _serve(self, slot: Slot, queue: list, bar) -> None:
        """Take cases from ``queue`` until it is empty, the run stops or the slot retires."""
        while not self._stopping and not slot.retired:
            with self._lock:
                if not queue:
                    return
                case, impls = self._next_case(queue) if self.builds is not None else queue.pop(0)
                label = f"gpu{slot.index} {case}" if self.multi else str(case)
                bar.case(label)
            with self._build_lock:
                self._await_builds(case, impls)
            try:
                self.run_case(case, impls, lambda name: self._advance(bar, label, name), slot)
            except SlotLost as lost:
                with self._lock:
                    queue.insert(0, (case, lost.pending))
                print(f"GPU {slot.index}: {lost}; its share goes to the other GPUs", file=sys.stderr,
                      flush=True)
                return
            with self._lock:
                self.out.save()

    def _advance(self, bar, label: str, name: str) -> None:
        with self._lock:
            bar.label = label  # the line names the case this row came from, whichever thread set the bar
            bar.advance(name)

    def _finish(self) -> None:
        ends = {}
        if self.plan.device == "cuda":
            from suite.gpus import visible

            for slot in self.slots:
                ends[slot.index] = environment.clocks(visible(slot.index) if slot.visible else None)
        for r in self.out.rows:
            if r.get("run_id") == self.run_id and r.get("sm_clock_end_mhz") is None:
                end = ends.get(r.get("device_index"), {})
                r["sm_clock_end_mhz"] = end.get("sm_mhz")
                r["mem_clock_end_mhz"] = end.get("mem_mhz")
        if self.out.rows:
            self.out.save()


def gpu_slots(indices: list[int], recorded: dict | None = None) -> list[Slot]:
    """One slot per listed index; a repeated index shares its first slot's ceilings.
    ``recorded``: device index -> the ceilings a resumed run's rows of it were scored on."""
    from suite.gpus import visible

    recorded = recorded or {}
    slots: list[Slot] = []
    leaders: dict[int, Slot] = {}
    for i in indices:
        slot = Slot(index=i, visible=visible(i), ceil=recorded.get(i), leader=leaders.get(i))
        leaders.setdefault(i, slot)
        slots.append(slot)
    return slots


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
            from suite.plain import rich_text

            self._bar.update(self._task, description=rich_text(label[:60]))  # a plugin's names are not markup

    def advance(self, impl: str) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.advance(self._task)
        else:
            elapsed = time.monotonic() - self.started
            eta = elapsed / self.done * (self.total - self.done) if self.done else 0
            print(f"[{self.done}/{self.total} {elapsed:.0f}s eta {eta:.0f}s] {self.label} {impl}",
                  file=sys.stderr, flush=True)
