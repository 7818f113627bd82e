"""Memoisation for the cost model's pure functions.

Candidates share most of their arithmetic (a layout's per-stage kernel times do not depend on
its ZeRO stage or offload; its activations do not depend on its data-parallel or expert-parallel
degree, nor on the pipeline stage per layer). `memo` caches a pure function on its arguments:
numpy arrays (the search's variants of one shape, `variants.py`) by content, so that cached
results are shared — callers must not modify them in place. It simply calls the function when
an argument is not hashable (layout variants).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, ParamSpec, TypeVar

import numpy as np

P = ParamSpec("P")
R = TypeVar("R")

CACHE_SIZE = 1 << 16


class _ByContent:
    """A numpy array as a cache key: equal to another of the same dtype, shape and values."""

    __slots__ = ("array", "key")

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.key = (array.dtype.str, array.shape, array.tobytes())

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ByContent) and self.key == other.key


def _key(x: Any) -> Any:
    return _ByContent(x) if isinstance(x, np.ndarray) and x.dtype != object else x


def _value(x: Any) -> Any:
    return x.array if isinstance(x, _ByContent) else x


def memo(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` with an LRU cache (the function must be pure; array arguments keyed by content)."""

    @lru_cache(maxsize=CACHE_SIZE)
    def cached(*args: Any, **kwargs: Any) -> R:
        return fn(*map(_value, args), **{k: _value(v) for k, v in kwargs.items()})

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        keys, kw_keys = tuple(map(_key, args)), {k: _key(v) for k, v in kwargs.items()}
        try:
            hash((keys, tuple(kw_keys.items())))
        except TypeError:  # an unhashable argument: compute it
            return fn(*args, **kwargs)
        return cached(*keys, **kw_keys)

    wrapper.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
    return wrapper
