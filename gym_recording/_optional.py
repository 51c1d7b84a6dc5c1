"""Lazy imports of optional dependencies, with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from gym_recording._errors import DependencyNotInstalled

__all__ = ["require"]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise :class:`DependencyNotInstalled` naming ``extra``.

    Args:
        module: The module to import, e.g. ``"pandas"``.
        extra: The gym-recording extra that installs it, e.g. ``"notebook"``.
        what: What needs it, for the message, e.g. ``"Recording.summary()"``.

    Returns:
        The imported module.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise DependencyNotInstalled.for_extra(module, extra, what) from exc
