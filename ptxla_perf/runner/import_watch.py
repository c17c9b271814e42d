"""Told when the program imports a module, by what it does rather than by its text: a `sys.meta_path` finder sees
every import of the watched names - an `import a, jax` line, a module of the script's own that imports it,
`importlib.import_module`, `__import__` - and calls back once the module's own code has run, before the statement
that imported it goes on (so hooks installed in the callback are in place before the program's first call into it).

Nothing is imported or changed here: the import is found and run by the finders and the loader that would have
run it anyway, and the module keeps its own loader and spec. An import that fails is told too, then raised as it
would be without us."""
from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Iterable


class ImportWatch:
    """Watches the top-level modules `names`. `on_import(name)`: `name`'s import completed (one imported before
    the watch was installed is the caller's to look up in sys.modules). `on_failure(name, exc)`: importing it
    raised `exc` (it is not installed, or its own imports failed), which then goes on to the program."""

    def __init__(self, names: Iterable[str], on_import: Callable[[str], None],
                 on_failure: Callable[[str, BaseException], None]):
        self.names = set(names)
        self.on_import = on_import
        self.on_failure = on_failure
        self._busy = threading.local()  # our own look-up through the other finders must not find us again

    def install(self) -> "ImportWatch":
        sys.meta_path.insert(0, self)
        return self

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass

    def find_spec(self, fullname: str, path: Any = None, target: Any = None):
        """The spec the other finders give, with its loader wrapped for the duration of this one import."""
        if fullname not in self.names or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = _find(self, fullname, path, target)
        except ImportError as exc:  # a finder that says it is absent (e.g. a site that blocks it)
            self.on_failure(fullname, exc)
            raise
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            if spec is None:  # not installed: the import system raises ModuleNotFoundError after us
                self.on_failure(fullname, ModuleNotFoundError(f"No module named {fullname!r}", name=fullname))
            return None
        spec.loader = _Loader(spec.loader, self)
        return spec


def _find(watch: ImportWatch, fullname: str, path: Any, target: Any):
    """What the finders after `watch` on sys.meta_path say, as the import system would ask them."""
    for finder in list(sys.meta_path):
        if finder is watch:
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(fullname, path, target)
        if spec is not None:
            return spec
    return None


class _Loader:
    """The real loader, run as is; its module is given its own loader back before its code runs, and the watch is
    told when that code has returned."""

    def __init__(self, real: Any, watch: ImportWatch):
        self.real = real
        self.watch = watch

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module) -> None:
        # the module's __spec__.loader and __loader__ are the real one again before its code runs (it may read
        # its own resources through them)
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.real
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.real
        name = module.__name__
        try:
            self.real.exec_module(module)
        except BaseException as exc:
            if isinstance(exc, Exception):
                self.watch.on_failure(name, exc)
            raise
        self.watch.on_import(name)

    def __getattr__(self, name: str):  # anything else the import system or a library asks of the loader
        return getattr(self.real, name)

