"""Score on Ray: GPU actors that each hold one model at a time (``pip install 'didmem[ray]'``).

Ray is imported only when a :class:`RayRunner` runs. The driver (this process) plans the run,
hands work items to the actors and writes each returned part with the same
:class:`~didmem.backends.PartStore` as :class:`~didmem.runners.LocalRunner`; the actors need
to read the checkpoints and nothing else, and no shared output file system is needed.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Mapping

from ..backends._parts import time_label
from .._validation import Instance, Integral, Interval, check_all
from ..errors import DidmemError, ParameterError, optional_import
from ._base import Runner, error_text
from ._ray_connect import init_ray
from .ray_tasks import read_outcomes

__all__ = ["RayRunner", "WorkerError"]


class WorkerError(DidmemError, RuntimeError):
    """A Ray actor could not start: it failed to build or check its copy of the backend."""

# work items queued on one actor at once: one running, one waiting, so that the actor's
# device does not idle while the driver receives a part and sends the next item.
_DEPTH = 2


class _ScoringWorker:
    """The body of a Ray actor: builds its own backend, scores work items, returns parts."""

    def __init__(self, payload, instances, metrics) -> None:
        self.instances = instances
        self.metrics = tuple(metrics)
        # An error here is kept and raised by every call, not raised: an actor whose __init__
        # raises dies, and Ray then reports only "the actor died" to the driver, without the
        # error (a checkpoint broken after the driver's check, say).
        self.failure = None
        try:
            self.backend = payload.build() if hasattr(payload, "build") else payload
            # the same checks as on the driver; they also set state that scoring reads (for
            # transformers, the end-of-sequence tokens from the checkpoints' config)
            self.backend.validate(instances, self.metrics)
        except Exception as exc:  # noqa: BLE001 - raised again by describe() and run()
            self.failure = exc

    def _check_started(self) -> None:
        if self.failure is not None:
            raise self.failure

    def describe(self) -> dict:
        self._check_started()
        return self.backend.describe()

    def run(self, item):
        self._check_started()
        try:
            return self.backend.run_item(item, self.instances, self.metrics)
        except Exception:
            with contextlib.suppress(Exception):
                self.backend.release()
            raise

    def release(self) -> None:
        if self.failure is None:
            self.backend.release()


class RayRunner(Runner):
    """Runs the work items on Ray actors, on one machine or an existing cluster.

    Each actor builds its own copy of the backend (from :meth:`OutcomeBackend.spec
    <didmem.backends.OutcomeBackend.spec>`, or a pickled copy when there is no spec), holds
    one checkpoint's model at a time, and takes the work items of the checkpoint it holds
    before it loads another: a checkpoint no actor holds yet first, then it helps with the
    checkpoint that has most items left. The driver writes every returned part atomically,
    exactly as :class:`LocalRunner` does, so the two runners resume each other's runs and
    return the same frame: bitwise the same for the same work items scored with as many torch
    threads as an actor has, and otherwise equal to floating-point tolerance (see
    :class:`~didmem.backends.TransformersBackend` and ``docs/ray.rst``).

    Parameters
    ----------
    out_dir, shard_size, max_retries, progress, model
        As in :class:`Runner`. Use a ``shard_size`` (say 1,024 sequences) so that each
        checkpoint has several items to share between actors and a killed run loses little.
    num_workers : int, optional
        Number of actors; defaults to the cluster's GPUs divided by ``num_gpus`` (one actor
        when the cluster has no GPU), and never more than the items to run or than the
        cluster's GPUs and CPUs can hold at once (an autoscaling cluster counts the nodes it
        has when the run starts).
    num_gpus : float, optional
        GPUs reserved by each actor; defaults to 1 when the cluster has GPUs, else 0.
    num_cpus : float
        CPUs reserved by each actor.
    address : str, optional
        Address of an existing Ray cluster (``"auto"``, ``"ray://head:10001"``); ``None``
        uses the Ray instance this process already joined, or starts a local one. A Ray
        instance the runner started is shut down when the run ends.
    init_kwargs : dict, optional
        More keyword arguments for ``ray.init`` when the runner starts or joins Ray.

    Attributes
    ----------
    last_assignments : dict of int to list of str
        After a run: the parts that each actor scored, by actor index, in order.

    Notes
    -----
    Progress is shown with Ray's own ``ray.experimental.tqdm_ray`` bar on the driver. A work
    item whose actor raises is tried again, up to ``max_retries`` times; an actor that dies
    (a crash, a lost node) is replaced and its items are tried again the same way. When an
    actor dies with several items queued on it, which one killed it is unknown (even a
    finished item's result can be lost with the process), so none of them is charged an
    attempt and each is tried again by itself: the one that kills its actor alone is
    charged, and the items queued beside it are not lost with it.

    Examples
    --------
    >>> runner = RayRunner(out_dir="scores", num_workers=8, shard_size=1024)  # doctest: +SKIP
    >>> frame = runner.run(backend, token_ids, unit_ids=ids)  # doctest: +SKIP
    """

    _constraints = {
        "num_workers": Integral(1, allow_none=True),
        "num_gpus": Interval(0, None, allow_none=True),
        "num_cpus": Interval(0, None),
        "address": Instance(str, allow_none=True,
                            description="a string such as 'auto' or 'ray://head:10001', or None"),
        "init_kwargs": Instance(Mapping, allow_none=True,
                                description="a mapping of ray.init keywords, or None"),
    }

    def __init__(self, out_dir=None, *, num_workers: int | None = None,
                 num_gpus: float | None = None, num_cpus: float = 1, address: str | None = None,
                 init_kwargs: dict | None = None, shard_size=None, max_retries: int = 2,
                 progress: bool | None = None, model: str | None = None) -> None:
        super().__init__(out_dir, shard_size=shard_size, max_retries=max_retries,
                         progress=progress, model=model)
        check_all("RayRunner", {"num_workers": num_workers, "num_gpus": num_gpus,
                                "num_cpus": num_cpus, "address": address,
                                "init_kwargs": init_kwargs}, self._constraints)
        self.num_workers, self.num_gpus, self.num_cpus = num_workers, num_gpus, num_cpus
        self.address = address
        self.init_kwargs = dict(init_kwargs or {})
        self.last_assignments: dict = {}

    @contextlib.contextmanager
    def _session(self, backend, instances, plan, todo):
        ray = optional_import("ray", "ray")
        started = False
        if not ray.is_initialized():
            kwargs = {"log_to_driver": True, **self.init_kwargs}
            init_ray(ray, self.address, **kwargs)  # fails fast where nothing answers
            started = True
        session = None
        try:
            session = _RaySession(self, ray, backend, instances, plan, n_items=len(todo))
            yield session
        finally:
            if session is not None:
                session.stop()
            if started:
                ray.shutdown()


class _RaySession:
    def __init__(self, runner: RayRunner, ray, backend, instances, plan, n_items: int) -> None:
        self.runner, self.ray, self.plan = runner, ray, plan
        gpus = runner.num_gpus
        if gpus is None:
            gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0
        resources = ray.cluster_resources()
        n = runner.num_workers
        if n is None:
            n = int(resources.get("GPU", 0) // gpus) if gpus else 1
        # actors that cannot be placed would wait for ever with items queued on them
        for name, need in (("GPU", gpus), ("CPU", runner.num_cpus)):
            if need:
                fit = int(resources.get(name, 0) // need)
                if fit == 0:
                    raise ParameterError(
                        f"RayRunner reserves {need} {name}s per actor, but the Ray cluster has "
                        f"{resources.get(name, 0):g}; set num_gpus / num_cpus to what a node has."
                    )
                n = min(n, fit)
        self.n_workers = max(1, min(n, n_items))
        backend.release()  # a pickled copy must not carry a loaded model
        spec = backend.spec()
        self.payload = spec if spec is not None else backend
        self.instances_ref = ray.put(instances)
        self.actor_class = ray.remote(_ScoringWorker).options(
            num_gpus=gpus, num_cpus=runner.num_cpus
        )
        self.actors = [self._new_actor() for _ in range(self.n_workers)]
        self.outstanding: list = []  # calls in flight when an error ended execute()

    def _new_actor(self):
        return self.actor_class.remote(self.payload, self.instances_ref, list(self.plan.metrics))

    def describe(self) -> dict:
        try:
            return self.ray.get(self.actors[0].describe.remote())
        except self.ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None)
            raise WorkerError(
                "A Ray actor could not build and check the backend: "
                f"{error_text(cause if cause is not None else exc)}"
            ) from exc

    def stop(self) -> None:
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)
        self.actors = []
        # calls still in flight when an error ended execute(): their actors are gone, so
        # each now fails; read them before Ray shuts down, or it prints them with tracebacks
        outstanding, self.outstanding = self.outstanding, []
        read_outcomes(self.ray, outstanding)

    def execute(self, pending: list, sink) -> list:
        ray, max_tries = self.ray, 1 + self.runner.max_retries
        queues: dict = {}
        for item in pending:
            queues.setdefault(item.checkpoint, deque()).append(item)
        held = [None] * len(self.actors)  # the checkpoint each actor holds
        running: dict = {}  # object ref -> (actor index, item)
        tries: dict = {}
        alone: set = set()  # items lost with others when an actor died: next run alone
        failures = []
        self.runner.last_assignments = {}
        bar = _ray_bar(self.runner.progress, len(pending))

        def next_item(i):
            c = held[i]
            if c is None or not queues.get(c):
                free = [k for k, q in queues.items() if q and k not in held]
                busy = sorted((k for k, q in queues.items() if q), key=lambda k: -len(queues[k]))
                c = free[0] if free else (busy[0] if busy else None)
                held[i] = c
            return None if c is None else queues[c].popleft()

        def fill(i):
            while True:
                mine = [it for a, it in running.values() if a == i]
                if len(mine) >= _DEPTH or any(it in alone for it in mine):
                    return
                item = next_item(i)
                if item is None:
                    return
                if item in alone and mine:  # an item under suspicion runs by itself
                    queues[item.checkpoint].appendleft(item)
                    return
                running[self.actors[i].run.remote(item)] = (i, item)

        def retry_or_fail(item, error, *, charge=True):
            tries[item] = tries.get(item, 0) + charge
            if tries[item] < max_tries:
                queues[item.checkpoint].appendleft(item)
            else:
                failures.append((item, error))

        try:
            for i in range(len(self.actors)):
                fill(i)
            while running:
                ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
                for ref in ready:
                    i, item = running.pop(ref)
                    try:
                        frame = ray.get(ref)
                    except ray.exceptions.RayActorError as exc:
                        # the actor died: its queued items fail too; replace it. Which of
                        # them killed it is unknown when there were several (a finished
                        # item's result can be lost with the process), so none is charged
                        # an attempt and each is tried again by itself: an item that kills
                        # its actor alone is charged, and the others are not lost with it
                        mine = [r for r, (a, _) in running.items() if a == i]
                        lost = [item] + [running.pop(r)[1] for r in mine]
                        for it in lost:
                            charge = len(lost) == 1
                            if not charge:
                                alone.add(it)
                            retry_or_fail(it, error_text(exc), charge=charge)
                        with contextlib.suppress(Exception):
                            ray.kill(self.actors[i])
                        self.actors[i], held[i] = self._new_actor(), None
                    except ray.exceptions.RayTaskError as exc:
                        cause = getattr(exc, "cause", None)
                        retry_or_fail(item, error_text(cause if cause is not None else exc))
                    else:
                        sink(item, frame)
                        self.runner.last_assignments.setdefault(i, []).append(item.part_name)
                        if bar is not None:
                            bar.set_description(f"scoring (checkpoint {time_label(item.checkpoint)})")
                            bar.update(1)
                    for j in range(len(self.actors)):
                        fill(j)
        finally:
            self.outstanding = list(running)  # empty unless an error ended the loop
            if bar is not None:
                bar.close()
        return sorted(failures, key=lambda f: (f[0].checkpoint, f[0].shard))


def _ray_bar(progress, total: int):
    if progress is False or total == 0:
        return None
    from ray.experimental.tqdm_ray import tqdm

    return tqdm(total=total, desc="scoring", unit="item")
