"""How a run ended -> the report's `run.status`, the process exit code and the reason: decided here only.

The session's context manager, the Hydra runner and the `profile` command all end a run by calling `outcome(exc)`
with what the run raised (or None), so a recipe's `sys.exit(0)`, a guard stop and a Ctrl-C read the same
everywhere (docs/report.md: `run.status`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


class RunStopped(KeyboardInterrupt):
    """Raised at a step boundary to stop the user's loop: a signal arrived, or a guard tripped."""

    def __init__(self, signum: int | None, reason: str):
        super().__init__(reason)
        self.signum = signum
        self.reason = reason

    def __reduce__(self):  # crosses process boundaries: a stopped spawned child re-raises it in the parent
        return (RunStopped, (self.signum, self.reason))

    @property
    def exit_code(self) -> int:
        return 128 + self.signum if self.signum else 3


class SessionError(RuntimeError):
    """A problem with the session's own set-up (bad port, unknown backend): a one-line message for the user."""


@dataclass(frozen=True)
class Outcome:
    status: str  # completed | interrupted | stopped | crashed
    exit_code: int
    reason: str | None = None


def exit_code_of(exc: SystemExit) -> int:
    """`sys.exit(None)` is 0, `sys.exit(n)` is n, `sys.exit("message")` is 1 (Python prints the message)."""
    return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)


def outcome(exc: BaseException | None) -> Outcome:
    if exc is None:
        return Outcome("completed", 0)
    if isinstance(exc, RunStopped):
        return Outcome("interrupted" if exc.signum else "stopped", exc.exit_code, exc.reason)
    if isinstance(exc, KeyboardInterrupt):
        return Outcome("interrupted", 130, "KeyboardInterrupt")
    if isinstance(exc, SystemExit):
        code = exit_code_of(exc)
        return Outcome("completed" if code == 0 else "crashed", code,
                       None if code == 0 else f"SystemExit: {exc.code}")
    return Outcome("crashed", 1, f"{type(exc).__name__}: {exc}")


def call(body: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """`body()`'s result and what it raised, whatever it is (a script's own end: Ctrl-C, sys.exit, a crash): the
    caller reports the run all the same, then decides what goes on (Session.run, spawn_child.ChildTarget)."""
    try:
        return body(), None
    except BaseException as caught:  # noqa: BLE001 - handed back to the caller, never swallowed
        return None, caught
