"""Where a grid sweep's batches run: in this process, on a pool of worker processes (a worker that
dies costs exactly its batch, which is recorded with the error, and is replaced), or as Ray tasks
(a probe first checks that the workers can unpickle the grid and its evaluate and run the same
accel-sim). Each takes the batches a run (grid_run.py) hands out and gives back what they
returned, through evaluate_batch, which never raises."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import re
import signal
import time
from pathlib import Path
from typing import Any, Callable

from accel_sim.errors import UsageError
from accel_sim.grid_results import one_line
from accel_sim.version import __version__


TARGET_RAY_BATCH_S = 1.0   # a Ray task costs a few ms to schedule and return


# Worker processes per core, at most: points are CPU-bound, so workers beyond the cores only take
# turns while each holds a process of its own; four a core leaves room for points that wait.
MAX_WORKERS_PER_CORE = 4


RAY_INSTALL = 'pip install "accel-sim[ray]"'


Evaluate = Callable[[Any, list], list]


def evaluate_batch(evaluate: Evaluate, grid, indices: list[int]) -> tuple[tuple, float]:
    """EVALUATE on one batch, in whatever process runs it: (("ok", rows) or ("error", one
    line), seconds). It does not raise: an exception becomes the batch's error."""
    started = time.perf_counter()
    try:
        outcome = ("ok", evaluate(grid, indices))
    except BaseException as e:   # noqa: B036 -- SystemExit from a point is that point's failure too
        outcome = ("error", one_line(e))
    return outcome, time.perf_counter() - started


def max_workers() -> int:
    """The most worker processes run_grid starts on this machine."""
    return MAX_WORKERS_PER_CORE * available_cores()


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_in_process(run: Any, evaluate: Evaluate, grid) -> None:
    while (batch := run.next_batch()) is not None:
        outcome, seconds = evaluate_batch(evaluate, grid, batch)
        run.record(batch, outcome, seconds)


def _worker_main(conn, evaluate: Evaluate, grid, parent_pid: int, inherited: list, journal_fd: int | None) -> None:
    """A pool worker: batches in, (outcome, seconds) out, until None or its parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle
    for other in inherited:   # fork: the parent's ends of the pipes, so that a dead parent is noticed
        other.close()
    if journal_fd is not None:   # fork: the journal's lock is the parent's alone, gone when it is
        try:
            os.close(journal_fd)
        except OSError:
            pass
    while True:
        while not conn.poll(0.5):
            if os.getppid() != parent_pid:
                return
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        outcome, seconds = evaluate_batch(evaluate, grid, batch)
        try:
            conn.send((outcome, seconds))
        except (BrokenPipeError, EOFError, ConnectionResetError):
            return
        except Exception as e:   # rows that do not pickle
            conn.send((("error", f"the batch's rows cannot be sent back: {one_line(e)}"), seconds))


class _Worker:
    def __init__(self, context, method: str, evaluate: Evaluate, grid, others: list["_Worker"],
                 journal: Any) -> None:
        self.conn, child = context.Pipe(duplex=True)
        inherited = [self.conn] + [w.conn for w in others] if method == "fork" else []
        journal_fd = journal.file.fileno() if method == "fork" and journal.file is not None else None
        self.process = context.Process(target=_worker_main, args=(child, evaluate, grid, os.getpid(), inherited,
                                                                  journal_fd),
                                       daemon=True, name="accel-sim-grid-worker")
        try:
            self.process.start()
        except BaseException:
            self.conn.close()
            raise
        finally:
            child.close()
        self.batch: list[int] | None = None

    def stop(self, wait_s: float) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(wait_s)
        self.kill()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.conn.close()


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def run_in_pool(run: Any, evaluate: Evaluate, grid, count: int, start_method: str | None) -> None:
    method = start_method or ("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    context = multiprocessing.get_context(method)
    run.parallel = count
    workers: list[_Worker] = []
    finished = False

    def start() -> _Worker | None:
        """A new worker, or None where the system cannot start one (out of processes or memory):
        the sweep goes on with the workers it has, or in this process."""
        try:
            workers.append(_Worker(context, method, evaluate, grid, workers, run.journal))
        except OSError:
            return None
        return workers[-1]

    def replace(dead: _Worker) -> _Worker | None:
        dead.kill()
        workers.remove(dead)
        return start()

    try:
        for _ in range(min(count, max(1, run.pending_points))):
            if start() is None:
                break
        idle = list(workers)
        while True:
            while idle:
                batch = run.next_batch()
                if batch is None:
                    break
                worker = idle.pop()
                while worker is not None:
                    try:
                        worker.conn.send(batch)
                        break
                    except OSError:   # it died while idle (killed from outside): its batch is not lost
                        worker = replace(worker)
                if worker is None:   # and no other could be started: this process does the batch
                    run.record(batch, *evaluate_batch(evaluate, grid, batch))
                    continue
                worker.batch = batch
            busy = [w for w in workers if w.batch is not None]
            if not workers:   # none could be started, or none replaced
                run_in_process(run, evaluate, grid)
            if not busy:
                break
            ready = set(multiprocessing.connection.wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
            for worker in busy:
                if worker.conn in ready or worker.process.sentinel in ready:
                    reply = None
                    batch, worker.batch = worker.batch, None
                    try:
                        if worker.conn.poll():
                            reply = worker.conn.recv()
                    except (EOFError, OSError):
                        pass   # it died, maybe in the middle of its reply
                    except Exception as e:   # a whole reply that does not unpickle here
                        reply = (("error", f"the worker's rows cannot be read: {one_line(e)}"), 0.0)
                    if reply is not None:
                        run.record(batch, *reply)
                        idle.append(worker)
                        continue
                    worker.process.join(5)
                    run.record(batch, ("error", f"the worker process died ({_death(worker.process.exitcode)})"), 0.0)
                    new = replace(worker)
                    if new is not None:
                        idle.append(new)
        finished = True
    finally:
        for worker in workers:
            if finished:
                worker.stop(5)
            else:
                worker.kill()


def _check_ray_workers(ray, evaluate_ref, grid_ref) -> None:
    """A probe task before the first batch: a cluster whose workers cannot import accel-sim (or
    run another version) is a UsageError now, not every point failing one by one."""
    try:
        found = ray.get(ray.remote(num_cpus=0, max_retries=0)(ray_probe).remote(evaluate_ref, grid_ref))
    except Exception as e:
        raise UsageError(f"the Ray workers cannot evaluate this grid: {_ray_error_text(e)} (install accel-sim "
                         "on the cluster's nodes, or let accel-sim start Ray to ship itself)") from None
    if found.get("accel_sim") != __version__:
        raise UsageError(f"the Ray workers run accel-sim {found.get('accel_sim')}, this is {__version__}: "
                         "install the same version on the cluster's nodes")


def import_ray():
    try:
        import ray
    except ImportError:
        raise UsageError(f"--ray needs Ray: {RAY_INSTALL}") from None
    return ray


def ray_runtime_env() -> dict:
    """The runtime_env run_grid gives ray.init: this accel_sim package (its Python files, data
    and built core) shipped to the cluster's workers, so that they run the driver's code whatever
    is installed there. Pass it to ray.init yourself when you initialize Ray before run_grid."""
    return {"py_modules": [str(Path(__file__).resolve().parent)]}


def ray_probe(evaluate: Evaluate, grid) -> dict:
    """Runs as a Ray task before the sweep: getting here means the worker unpickled EVALUATE and
    GRID (so it imports their modules); returns what must match the driver."""
    return {"accel_sim": __version__}


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


def _ray_error_text(error: BaseException) -> str:
    """One line for a Ray failure: the exception at the end of a remote traceback (an import
    error, say), else the error's own first line."""
    lines = [line.strip() for line in _ANSI.sub("", str(error)).splitlines() if line.strip()]
    raised = [line for line in lines if _EXCEPTION_LINE.match(line)]
    if raised:
        return raised[-1]
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def run_on_ray(run: Any, evaluate: Evaluate, grid, address: str) -> None:
    ray = import_ray()
    own = False
    if not ray.is_initialized():
        try:
            if address == "local":
                ray.init(ignore_reinit_error=True, runtime_env=ray_runtime_env())
            else:
                ray.init(address=address, ignore_reinit_error=True, runtime_env=ray_runtime_env())
        except Exception as e:   # ConnectionError, RuntimeError, ValueError, ... by version
            raise UsageError(f"cannot connect to the Ray cluster at {address}: {one_line(e)} "
                             "(start one with `ray start --head`, or use --ray local)") from None
        own = True
    pending: dict = {}
    try:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        run.parallel = cpus
        run.target_s = TARGET_RAY_BATCH_S
        evaluate_ref, grid_ref = ray.put(evaluate), ray.put(grid)
        _check_ray_workers(ray, evaluate_ref, grid_ref)
        task = ray.remote(num_cpus=1, max_retries=1)(evaluate_batch)
        limit = 2 * cpus
        while True:
            while len(pending) < limit:
                batch = run.next_batch()
                if batch is None:
                    break
                pending[task.remote(evaluate_ref, grid_ref, batch)] = batch
            if not pending:
                break
            ready, rest = ray.wait(list(pending), num_returns=1)
            if rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in ready:
                batch = pending.pop(ref)
                try:
                    outcome, seconds = ray.get(ref)
                except Exception as e:   # RayTaskError, WorkerCrashedError, ObjectLostError, ...
                    outcome, seconds = ("error", f"the Ray task failed: {_ray_error_text(e)}"), 0.0
                run.record(batch, outcome, seconds)
    finally:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass
        if own:
            ray.shutdown()
