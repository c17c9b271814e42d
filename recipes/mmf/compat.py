"""Compatibility stand-ins that let MMF 1.0.0rc10 (2020) import and train on torch 2.9 / Python 3.11.

Everything here is installed *in this process only*, by :func:`install`, which the recipe calls just
before it imports MMF.  Nothing is installed globally and no file of MMF or transformers is edited.
Each stand-in says why it exists; :data:`INSTALLED` records which ones were actually applied (the
recipe puts that list into the report).

1. ``demjson``: MMF's ``mmf/utils/configuration.py`` does ``import demjson`` (only used to parse
   ``config_override`` command-line strings, which this recipe never passes).  ``demjson`` 2.x does
   not build on Python 3 setuptools>=58 (``use_2to3``); its maintained fork ``demjson3`` has the same
   API, so it is registered under the old name.
2. ``torchtext.vocab``: ``mmf/utils/vocab.py`` does ``from torchtext import vocab`` at import time,
   but only the GloVe/FastText word-embedding processors use it (``vocab.pretrained_aliases``).
   torchtext is retired and has no build for torch 2.9, so an import stand-in with an empty
   ``pretrained_aliases`` is enough for MMBT (which tokenises with BERT ids).  Asking it for a
   pretrained vector raises a clear error instead of downloading.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

INSTALLED: list[str] = []


def _install_demjson() -> None:
    if "demjson" in sys.modules:
        return
    if importlib.util.find_spec("demjson") is not None:
        return  # a working demjson exists; use it
    try:
        demjson3 = importlib.import_module("demjson3")
    except ImportError as e:  # pragma: no cover - requirements-mmf.txt installs demjson3
        raise ImportError(
            "MMF imports `demjson`; install its Python-3 fork with "
            "`pip install --no-deps -r requirements-mmf.txt` (demjson3)"
        ) from e
    sys.modules["demjson"] = demjson3
    INSTALLED.append("demjson -> demjson3 alias")


class _NoPretrainedVectors(dict):
    """``torchtext.vocab.pretrained_aliases`` stand-in: empty, and explains itself when indexed."""

    def __missing__(self, key):
        raise KeyError(
            f"pretrained word vectors {key!r} need torchtext, which has no build for this torch; "
            "the ptxla_perf mmf recipe only provides an import stand-in (MMBT does not use vectors)"
        )


def _install_torchtext_vocab() -> None:
    if "torchtext.vocab" in sys.modules:
        return
    try:
        if importlib.util.find_spec("torchtext") is not None:
            importlib.import_module("torchtext.vocab")
            return  # a working torchtext is installed
    except Exception:  # noqa: BLE001 - a torchtext built for another torch fails with OSError etc.
        for name in [m for m in sys.modules if m == "torchtext" or m.startswith("torchtext.")]:
            del sys.modules[name]

    torchtext = types.ModuleType("torchtext")
    torchtext.__doc__ = "ptxla_perf import stand-in (recipes/mmf/compat.py); not the real torchtext"
    torchtext.__path__ = []  # behaves as a package for `from torchtext import vocab`
    vocab = types.ModuleType("torchtext.vocab")
    vocab.__doc__ = torchtext.__doc__
    vocab.pretrained_aliases = _NoPretrainedVectors()

    class Vectors:  # referenced only in type positions / isinstance checks
        def __init__(self, *args, **kwargs):
            raise RuntimeError("torchtext.vocab.Vectors is not available (import stand-in)")

    vocab.Vectors = Vectors
    vocab.GloVe = Vectors
    vocab.FastText = Vectors
    torchtext.vocab = vocab
    sys.modules["torchtext"] = torchtext
    sys.modules["torchtext.vocab"] = vocab
    INSTALLED.append("torchtext.vocab import stand-in")


def install() -> list[str]:
    """Install the stand-ins (idempotent) and return the list of what was applied in this process."""
    _install_demjson()
    _install_torchtext_vocab()
    return list(INSTALLED)


def import_mmf():
    """Install the stand-ins, then import MMF (which imports all its models/datasets) and return it."""
    install()
    import mmf  # noqa: F401  (registers models, losses, optimizers, schedulers)
    import mmf.models.mmbt  # noqa: F401

    return sys.modules["mmf"]


# 3. Known deprecation warnings of 2020 code under torch 2.9, silenced only around the training loop
#    (exact message + module, so anything else still shows):
#    - transformers 2.3 ``AdamW.step`` (MMF's ``adam_w``) uses ``Tensor.add_(Number, Tensor)``, a
#      deprecated overload that still computes the same thing;
#    - MMF's ``BaseTrainer._run_scheduler`` calls ``lr_scheduler.step(num_updates)`` with an explicit
#      epoch, deprecated in torch but still honoured (closed form), and relied on for MMF's lr curve.
_KNOWN_DEPRECATIONS = (
    (r"This overload of add_? is deprecated", r"transformers\.optimization"),
    (r"This overload of addc(mul|div)_? is deprecated", r"transformers\.optimization"),
    (r"The epoch parameter in `scheduler\.step\(\)` was not necessary", r"torch\.optim\.lr_scheduler"),
)


def quiet_known_deprecations(sync_cap: bool = False):
    """Context manager that ignores just the deprecation warnings listed above.

    With ``sync_cap`` (the recipe's detect_anomaly guard is armed) it also ignores anomaly mode's
    "Error detected in AccumulateGrad" report of the guard's *own* exception, raised from a gradient
    hook to stop the update; the recipe reports the stop itself."""
    import contextlib
    import warnings

    @contextlib.contextmanager
    def _cm():
        with warnings.catch_warnings():
            for message, module in _KNOWN_DEPRECATIONS:
                warnings.filterwarnings("ignore", message=message, category=UserWarning, module=module)
            if sync_cap:
                warnings.filterwarnings(
                    "ignore", message=r"Error detected in torch::autograd::AccumulateGrad", category=UserWarning
                )
            yield

    return _cm()
