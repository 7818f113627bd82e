"""Memoisation for the cost model's pure functions.

The search prices thousands of candidates that share most of their arithmetic (a layout's
per-stage kernel times do not depend on its ZeRO stage or offload; its activations do not
depend on its data-parallel degree). `memo` caches a pure function on hashable arguments and
simply calls it when an argument is not hashable (numpy arrays of candidates).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

CACHE_SIZE = 1 << 16


def memo(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` with an LRU cache for hashable arguments (the function must be pure)."""
    cached = lru_cache(maxsize=CACHE_SIZE)(fn)

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            hash((args, tuple(kwargs.items())))
        except TypeError:  # an array argument: compute it
            return fn(*args, **kwargs)
        return cached(*args, **kwargs)

    wrapper.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
    return wrapper
