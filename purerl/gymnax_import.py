"""gymnax imported without loading its plotting libraries.

gymnax's package `__init__` imports every environment module; Catch, MetaMaze, Rooms and Pong
import `matplotlib.pyplot` at their top for rendering, and Pong seaborn too, which pulls in
scipy.stats and pandas: `import gymnax` takes 1.9 s without this and 0.86 s with it (2 cores,
jax 0.10.2), for code that only rendering calls. While gymnax's own modules run,
`defer_gymnax_plotting()` gives those imports a stand-in module that imports the real one at its
first attribute access, as rendering makes it, and forwards every attribute to it. Imports
before and after gymnax's get the real modules.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

DEFERRED = ("seaborn", "matplotlib.pyplot")  # imported by gymnax's modules, used only to render


class _Deferred(types.ModuleType):
    """Stands in for module `name` until one of its attributes is read; then imports it (and
    puts it in `sys.modules` in its place) and forwards every attribute to it. Its own
    `__spec__` and `__name__` are plain attributes, and other dunder names are not forwarded, so
    that the import system, looking them up, never loads the real module."""

    def __getattr__(self, attr):
        if attr.startswith("__"):  # what the import system looks up on any module
            raise AttributeError(attr)
        module = self.__dict__.get("_module")
        if module is None:
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
            module = self.__dict__["_module"] = importlib.import_module(self.__name__)
        return getattr(module, attr)


class _DeferredLoader(importlib.abc.Loader):
    def create_module(self, spec):
        module = _Deferred(spec.name)
        module.__spec__ = spec
        return module

    def exec_module(self, module):
        pass


class _DeferringLoader(importlib.abc.Loader):
    """gymnax's loader, executing its package with DEFERRED imports standing in."""

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
    finds DEFERRED modules as stand-ins."""

    deferring = False

    def find_spec(self, name, path=None, target=None):
        if self.deferring:
            if name not in DEFERRED or importlib.machinery.PathFinder.find_spec(name, path) is None:
                return None
            return importlib.machinery.ModuleSpec(name, _DeferredLoader())
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
