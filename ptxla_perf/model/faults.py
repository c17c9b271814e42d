"""Our own failures, kept out of the user's program: an exception anywhere in ptxla_perf's code (a hook around the
user's call, a boundary stage, a rule, a report section, a writer) is recorded here, said once on the console and
reported as `profiler_errors` (what failed, the traceback) with a `profiler_error` finding; the program's own calls,
output and exit code stay those of the plain run (docs/report.md: "When ptxla_perf itself fails").

Fault injection for tests: `PTXLA_PERF_FAULTS=where[,where...]` (`rule.*`: a prefix; `*`: all) makes the named points raise
`InjectedFault`; the names are the `where` strings passed to `check`/`guard`/`shielded` (docs/report.md lists them).
Paths run at every step or call (the boundary stages, the JAX call) inline `guarded` as a try block around
`if faults._INJECT: check(where)` and the call: the same point, one Python call less each.
"""
from __future__ import annotations

import os
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Callable

_INJECT = frozenset(w.strip() for w in os.environ.get("PTXLA_PERF_FAULTS", "").split(",") if w.strip())
_ALL = "*" in _INJECT
_PREFIXES = tuple(w[:-1] for w in _INJECT if w.endswith(".*"))  # "rule.*": every rule
MAX_KEPT = 50  # distinct failure points kept in a report (each counted, its first traceback kept)


class InjectedFault(RuntimeError):
    """Raised at a point PTXLA_PERF_FAULTS names: the fault-injection tests' stand-in for a bug of ours."""


def check(where: str) -> None:
    """Raise InjectedFault at `where` when the tests ask for it (one set lookup otherwise)."""
    if _INJECT and (_ALL or where in _INJECT or (_PREFIXES and where.startswith(_PREFIXES))):
        raise InjectedFault(f"injected fault at {where}")


@dataclass
class Fault:
    where: str
    error: str  # the exception's type name
    message: str
    traceback: str
    count: int = 1

    def to_json(self) -> dict[str, Any]:
        return {"where": self.where, "error": self.error, "message": self.message, "count": self.count,
                "traceback": self.traceback}


class Faults:
    """The failures of our own code in this process, by point; a session reads those since its start (`mark`)."""

    def __init__(self):
        self._seen: dict[str, Fault] = {}
        self._order: list[str] = []
        self._lock = threading.Lock()
        self._said = False
        self.say: Callable[[str], None] | None = None  # the session's console (rank 0 only), set at start

    def record(self, where: str, exc: BaseException) -> None:
        """Keep the first traceback of each point, count the rest; say the first one in one line."""
        with self._lock:
            f = self._seen.get(where)
            if f is not None:
                f.count += 1
                return
            if len(self._seen) >= MAX_KEPT:
                return
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]
            self._seen[where] = Fault(where, type(exc).__name__, str(exc)[:300], tb)
            self._order.append(where)
            first, self._said = not self._said, True
        say = self.say
        if say is not None and first:  # one line per session: the report lists every point
            try:
                say(f"ptxla_perf: note: internal error in {where} ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:120] if str(exc) else ''}); your program goes on, the report "
                    "lists it (and any other) under profiler_errors")
            except Exception:  # noqa: BLE001 - a console that fails is not worth a second failure
                pass

    def mark(self) -> int:
        """Where a session's failures begin (and its console line is still to be said)."""
        self._said = False
        return len(self._order)

    def seen(self) -> int:
        """How many points failed so far: a mark for `since` that leaves the session's console line alone."""
        with self._lock:
            return len(self._order)

    def since(self, mark: int) -> list[Fault]:
        with self._lock:
            return [self._seen[w] for w in self._order[mark:]]


FAULTS = Faults()


def guarded(where: str, fn: Callable[..., Any], *args: Any, default: Any = None, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, our code: a failure is recorded and `default` returned, never raised. A stop
    (RunStopped, KeyboardInterrupt) and SystemExit are BaseExceptions and go on."""
    try:
        check(where)
        return fn(*args, **kwargs)
    except Exception as exc:
        FAULTS.record(where, exc)
        return default


def shielded(where: str, body: Callable[[Callable[..., Any]], Any], real: Callable[..., Any], *args: Any,
             **kwargs: Any) -> Any:
    """`body(call)` is our code around the user's one call, `call(*a, **k)` being `real(*a, **k)`. If our code
    fails, the user's call still happens exactly once (now, if it had not yet) and its result is returned; an
    exception of the user's call itself goes on unchanged."""
    state = [0, None]  # 0: not called; 1: called and not returned (raised); 2: returned

    def call(*a: Any, **k: Any) -> Any:
        state[0] = 1
        out = real(*a, **k)
        state[0], state[1] = 2, out
        return out
    call.__name__ = getattr(real, "__name__", "call")  # our code may name the call it wraps (np.asarray)
    try:
        check(where)
        return body(call)
    except Exception as exc:
        if state[0] == 1:
            raise  # the user's own call raised: theirs, as in the plain run
        FAULTS.record(where, exc)
        return state[1] if state[0] == 2 else real(*args, **kwargs)


def errors_json(faults: list[Fault]) -> list[dict[str, Any]]:
    return [f.to_json() for f in faults]

