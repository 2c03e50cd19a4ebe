"""gymnax imported without loading its plotting libraries.

gymnax's package `__init__` imports every environment module, and two of them (Pong, Rooms)
import seaborn and `matplotlib.pyplot` at their top for rendering, which pulls in scipy.stats
and pandas: about 1.5 s of a command's start-up, for code that only rendering calls. While
gymnax's own modules run, `defer_gymnax_plotting()` makes those two imports lazy
(`importlib.util.LazyLoader`): the modules are created empty and load on their first attribute
access, as rendering makes it. Imports before and after gymnax's are untouched.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys

DEFERRED = ("seaborn", "matplotlib.pyplot")  # imported by gymnax's modules, used only to render


def _lazy_spec(name: str, path):
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is not None and spec.loader is not None:
        spec.loader = importlib.util.LazyLoader(spec.loader)
    return spec


class _DeferringLoader(importlib.abc.Loader):
    """gymnax's loader, executing its package with DEFERRED imports lazy."""

    def __init__(self, loader, finder):
        self.loader, self.finder = loader, finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.finder.deferring = True
        try:
            self.loader.exec_module(module)
        finally:
            self.finder.deferring = False
            if self.finder in sys.meta_path:
                sys.meta_path.remove(self.finder)


class _GymnaxFinder(importlib.abc.MetaPathFinder):
    """Finds gymnax the usual way, wrapping its loader once; while gymnax's package runs,
    finds DEFERRED modules with lazy loaders."""

    deferring = False

    def find_spec(self, name, path=None, target=None):
        if self.deferring:
            return _lazy_spec(name, path) if name in DEFERRED else None
        if name != "gymnax":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _DeferringLoader(spec.loader, self)
        return spec


def defer_gymnax_plotting() -> None:
    """Makes the first import of gymnax, whenever it comes, leave DEFERRED unloaded. Nothing
    changes when gymnax or every DEFERRED module is imported already."""
    if "gymnax" in sys.modules or all(name in sys.modules for name in DEFERRED):
        return
    if not any(isinstance(finder, _GymnaxFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _GymnaxFinder())
