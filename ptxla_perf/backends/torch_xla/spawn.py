"""Following `torch_xla.launch` / `xmp.spawn` children (the torch_xla half of spawn.py and spawn_child.py).

Both end in `torch_xla._internal.pjrt.spawn(fn, nprocs, start_method, args)`, which pickles `fn` into a
`ProcessPoolExecutor` of spawn-method processes. Replacing that module attribute in the parent hands the children
`wrap(fn)` instead: a picklable object (found by its module path, like the user's own function) that opens the
child's session around the user's function. The child re-imports the script as `__mp_main__` as it always
does; nothing is carried in the environment.

`run_multiprocess` also looks up `initialize_multiprocess` at call time and pickles it by name: replaced by
`_initialize` below, it runs first in each child's *main* thread (the user's function runs in a per-device
thread, where no signal handler can be installed), so a child can turn SIGINT/SIGTERM into a stop at its next
step boundary instead of dying mid-step.
"""
from __future__ import annotations

from typing import Any, Callable

from .. import spawn_child
from . import _private as P

pjrt = P.pjrt_module()
_REAL_INIT = getattr(pjrt, "initialize_multiprocess", None)  # captured on import: in a child, before any patch


def follow(wrap: Callable[[Callable], Any]) -> Callable[[], None] | None:
    """Patch the launcher; return the undo (None when this torch_xla has no such entry point)."""
    undo_torch = _follow_torch_mp(wrap)
    real_spawn = getattr(pjrt, "spawn", None) if pjrt is not None else None
    real_init = _REAL_INIT
    if real_spawn is None or getattr(real_spawn, "_ptxla_perf", False):
        return undo_torch

    def spawn(fn, nprocs=None, start_method="spawn", args=()):
        if nprocs == 1:  # runs in this very process: this process's own session sees its steps
            return real_spawn(fn, nprocs, start_method, args)
        return real_spawn(wrap(fn), nprocs, start_method, args)
    spawn._ptxla_perf = True
    spawn.__wrapped__ = real_spawn
    spawn.__doc__ = real_spawn.__doc__
    pjrt.spawn = spawn
    if real_init is not None:
        pjrt.initialize_multiprocess = _initialize

    def undo() -> None:
        if undo_torch:
            undo_torch()
        if pjrt.spawn is spawn:
            pjrt.spawn = real_spawn
        if real_init is not None and pjrt.initialize_multiprocess is _initialize:
            pjrt.initialize_multiprocess = real_init
    return undo


def _initialize(local_rank: int, local_world_size: int) -> None:
    """Runs in the child (pickled by name): its main thread, before the per-device threads start."""
    spawn_child.child_main_thread()
    return _REAL_INIT(local_rank, local_world_size)


def _follow_torch_mp(wrap: Callable[[Callable], Any]) -> Callable[[], None] | None:
    """`torch.multiprocessing.spawn(fn, args, nprocs)` / `start_processes` (the DDP examples' launcher) call
    `fn(i, *args)` in each child, as torch_xla's launcher does: the same stand-in follows them. Children started
    with plain `multiprocessing.Process` are not followed (docs/multiprocess.md)."""
    import torch.multiprocessing as tmp
    real = {name: getattr(tmp, name, None) for name in ("spawn", "start_processes")}
    if any(getattr(fn, "_ptxla_perf", False) for fn in real.values() if fn is not None):
        return None
    patched = {}
    for name, fn in real.items():
        if fn is None:
            continue

        def follow_children(target, *args, __real=fn, **kwargs):
            return __real(wrap(target), *args, **kwargs)
        follow_children._ptxla_perf = True
        follow_children.__wrapped__ = fn
        follow_children.__doc__ = fn.__doc__
        setattr(tmp, name, follow_children)
        patched[name] = follow_children

    def undo() -> None:
        for name, fn in patched.items():
            if getattr(tmp, name, None) is fn:
                setattr(tmp, name, real[name])
    return undo
