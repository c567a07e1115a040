"""Roder's score witness, loaded by every Python process a batch score starts (the witness's
folder leads ``PYTHONPATH``): it installs the unittest witness (``roder_score_unittest``) when
the process imports ``unittest``, and then runs the ``sitecustomize`` this one hides (the
interpreter's own, the task's), so the score's Python behaves as it would without Roder.

Standard library only, Python 3.6 syntax, types in comments.
"""

import os
import sys

if False:  # for the type comments only (``typing`` is not imported at every start)
    from collections.abc import Sequence  # noqa: F401
    from importlib.machinery import ModuleSpec  # noqa: F401
    from types import ModuleType  # noqa: F401
    from typing import Optional  # noqa: F401


def _find(name, path, entries=None):  # type: (str, Optional[Sequence[str]], Optional[list[str]]) -> Optional[ModuleSpec]
    """``name``'s spec from the other finders (no ``importlib.util``: it costs every Python of
    the score tens of milliseconds to import), on ``entries`` instead of ``sys.path`` if given."""
    for finder in sys.meta_path:
        if isinstance(finder, _UnittestWatch) or not hasattr(finder, "find_spec"):
            continue
        if entries is not None and getattr(finder, "__name__", "") != "PathFinder":
            continue
        spec = finder.find_spec(name, entries if entries is not None else path)
        if spec is not None:
            return spec
    return None


def _run_hidden():  # type: () -> None
    """Run the next ``sitecustomize`` on ``sys.path``, as if this one were not there."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = _find("sitecustomize", None, [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != here])
    if spec is None or spec.loader is None:
        return
    module = type(sys)("sitecustomize")
    module.__spec__, module.__file__, module.__loader__ = spec, spec.origin, spec.loader
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


class _UnittestWatch:
    """Installs the unittest witness right after ``unittest`` is first imported."""

    def find_spec(self, name, path=None, target=None):  # type: (str, Optional[Sequence[str]], Optional[ModuleType]) -> Optional[ModuleSpec]
        if name != "unittest":
            return None
        spec = _find(name, path)  # asked again until it is imported (``-m`` looks it up first)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):  # type: (ModuleType) -> None
            execute(module)
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            import roder_score_unittest  # type: ignore[import-not-found]  # beside it in the score

            roder_score_unittest.install(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if os.environ.get("RODER_SCORE_WITNESS") and "unittest" not in sys.modules:
    sys.meta_path.insert(0, _UnittestWatch())
try:
    _run_hidden()
finally:
    del _run_hidden
