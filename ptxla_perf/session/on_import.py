"""`profile`'s session, opened when the program imports its framework: the backend is found from what the program
does (import_watch.py), never from the script's text, and nothing of the framework is imported before the program
imports it (a script that sets JAX_PLATFORMS or XLA_FLAGS before its import gets what it set).

The session starts once the framework's own import has completed, before the statement that imported it goes on:
its hooks are in place before the program's first call into the framework, wherever the import is (the script, a
module of its own, a library; any import form). Which one (which_backend.py): the first imported, except that
torch_xla imported before the program ran a jitted JAX function takes over from JAX (a torch_xla script that
imports JAX for a utility, `import jax` sorted first). A backend named with `--backend` is the only one watched.

A program that never imports a framework, or whose import of it fails (torch_xla without torch), runs as it would
without us: its own output, its own error and exit code, then one line saying why nothing was profiled."""
from __future__ import annotations

import sys
from typing import Any, Callable

from ..frames import user_frame
from ..runner.import_watch import ImportWatch
from ..model.outcome import Outcome, call, outcome
from ..runner.requires import missing_framework
from ..runner.which_backend import FRAMEWORKS, takes_over


class SessionOnImport:
    """`open_session(backend, detection)` opens the run's session (`detection`: how the backend was found, in
    words: the report's `run.backend_detection`); `named`: the backend `--backend` named, else None (auto)."""

    def __init__(self, named: str | None, open_session: Callable[[str, str], Any]):
        self.named = named
        self.session: Any = None
        self._open = open_session
        self._failed: tuple[str, BaseException] | None = None  # the first watched import that raised
        self._open_error: str | None = None
        self.watch = ImportWatch([m for m, b in FRAMEWORKS.items() if named in (None, b)], self._imported,
                                 self._failure)

    def run(self, body: Callable[[], Any], on_end: Callable[[Outcome, BaseException | None], None]) -> int:
        """Run `body()` (the script) with the watch in place; end the session it opened, or say why none was.
        Returns the exit code. A Ctrl-C before any session: raised on (the CLI's one line, exit 130)."""
        for name in sorted(self.watch.names & set(sys.modules)):  # imported before the run (a wrapper's import)
            self._imported(name, "imported before the run started")
        self.watch.install()
        try:
            _, exc = call(body)
        finally:
            self.watch.remove()
        if self.session is not None:
            end, _ = self.session.end(exc, on_end)
            return end.exit_code
        if isinstance(exc, KeyboardInterrupt):
            raise exc
        end = outcome(exc)
        on_end(end, exc)  # the program's own traceback or sys.exit message, as Python prints it
        print(f"ptxla_perf: nothing profiled: {self.why_not(exc)}", file=sys.stderr, flush=True)
        return end.exit_code

    def why_not(self, exc: BaseException | None = None) -> str:
        """Why no session was opened, in one line; `exc`: what ended the program, if anything did."""
        if self._open_error:
            return self._open_error
        if self._failed is not None:
            name, exc = self._failed
            missing = missing_framework(FRAMEWORKS[name])
            return (f"the program's import of {name} failed: {missing}" if missing else
                    f"the program's import of {name} failed ({type(exc).__name__}: {_first_line(exc)})")
        wanted = self.named or "torch_xla or jax"
        if exc is not None and not isinstance(exc, SystemExit):  # e.g. a SyntaxError: the script never ran
            return f"the program ended ({type(exc).__name__}) before it imported {wanted}; no report written"
        if self.named:
            return f"the program never imported {self.named} (--backend {self.named}); no report written"
        return "the program imported neither torch_xla nor jax; no report written"

    def _imported(self, name: str, where: str | None = None) -> None:
        backend, current = FRAMEWORKS[name], self.session
        if current is not None:
            if self.named or not takes_over(current.backend, backend, current.ran):
                return
            current.discard()  # nothing measured yet: the run is the other framework's
            self.session = None
        if where is None:
            loc = user_frame(sys._getframe(1))[0]
            where = f"imported at {loc.file}:{loc.line}" if loc is not None else "imported"
        detection = f"{name} {where}" + (f" (--backend {self.named})" if self.named else "")
        try:
            self.session = self._open(backend, detection)
        except Exception as exc:  # noqa: BLE001 - never break the program's import: it runs unmeasured
            self._open_error = f"the {backend} session could not start: {_first_line(exc)}"

    def _failure(self, name: str, exc: BaseException) -> None:
        if self._failed is None:
            self._failed = (name, exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
