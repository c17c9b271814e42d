"""Which optional framework a path needs, said in one line before anything imports it: the frameworks are extras
(`pip install 'ptxla_perf[jax]'` has no torch), so a recipe for the other one must name the missing install, not
end in a traceback. Looks with `importlib.util.find_spec`: nothing is imported, no runtime starts."""
from __future__ import annotations

import importlib.util

# backend -> (the modules it imports, the extra that installs them)
FRAMEWORKS = {"torch_xla": (("torch", "torch_xla"), "torch_xla"), "jax": (("jax", "jaxlib"), "jax")}
# extra -> the frameworks it could move: a hint naming that extra pins the ones installed (keep())
KEEPS = {"torch_xla": ("torch",), "jax": ("jax", "jaxlib"), "jax-recipes": ("jax", "jaxlib")}
EXTRA_OF = {"flax": "jax-recipes", "xprof": "capture", "tensorboard": "tensorboard", "torchvision": "mmf"}


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that fails to import, or a broken module entry
        return False


def missing_framework(backend: str) -> str | None:
    """'needs torch_xla (torch, torch_xla not installed): pip install ...' or None when it is all there."""
    if backend not in FRAMEWORKS:
        return None
    modules, extra = FRAMEWORKS[backend]
    absent = [m for m in modules if not installed(m)]
    if not absent:
        return None
    return f"needs {backend} ({', '.join(absent)} not installed here): {install(extra)}"


def missing_package(exc: ModuleNotFoundError) -> str | None:
    """For an import that failed on a third-party package: 'needs the package flax (not installed)'."""
    top = (exc.name or "").partition(".")[0]
    if not top or top == "ptxla_perf" or installed(top):
        return None
    for backend, (modules, extra) in FRAMEWORKS.items():
        if top in modules:
            return f"needs {backend} ({top} not installed here): {install(extra)}"
    extra = EXTRA_OF.get(top)
    return f"needs the package {top!r}, not installed here" + (f": {install(extra)}" if extra else "")


def install(extra: str) -> str:
    """"pip install 'ptxla_perf[jax-recipes]' 'jax==0.12.0.1' 'jaxlib==0.12.0.1'": the extra, with the installed
    frameworks it could move pinned."""
    return f"pip install 'ptxla_perf[{extra}]'{keep(names=KEEPS.get(extra, ()))}"


def keep(found: dict[str, str | None] | None = None,
         names: tuple[str, ...] = ("torch", "torch_xla", "jax", "jaxlib")) -> str:
    """" 'jax==0.12.0.1' 'jaxlib==0.12.0.1'" for each of `names` installed here (or in `found`, name -> version):
    a hint's pip command that names them keeps the user's versions (pip would otherwise replace one that another
    package of the command wants newer)."""
    from importlib import metadata
    out = ""
    for dist in names:
        if found is not None:
            version = found.get(dist)
        else:
            try:
                version = metadata.version(dist)
            except metadata.PackageNotFoundError:
                version = None
        out += f" '{dist}=={version}'" if version else ""
    return out
