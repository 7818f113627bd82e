"""A stand-in for `torch`, so that DeepSpeed's and Megatron-LM's own config checks run on any
machine (issue 24). PyPI's torch wheel for Linux x86-64 is the CUDA build: without the CUDA
libraries beside it, `import torch` fails (libcudnn), and PyTorch's CPU build is not on PyPI.
The checks themselves are plain Python over the config (batch arithmetic, ZeRO stages,
parallel sizes); what they read from torch is small and given here explicitly:

- the version (`TORCH_VERSION`, the release tests/frameworks.txt pinned before this stand-in),
- the dtypes, as distinct objects with torch's names and aliases (`torch.half is
  torch.float16`), instances of `torch.dtype`,
- what a machine without a GPU answers about CUDA (`cuda.is_available()` is False, no devices;
  megatron_check.py gives the capability of the GPU the tests plan for, as before).

Everything else the frameworks' modules name while they load — base classes (`torch.nn.Module`,
`torch.autograd.Function`), decorators (`torch.jit.script`, `torch.compile(...)`), annotations,
whole submodules (`torch.distributed.checkpoint`) — is a placeholder: it can be subclassed,
called (a call with one callable is a decorator and returns it), and named further, but it is
never a value: its truth, iteration, length, numbers and order raise `TorchStubUsed`, so no
check can pass on an answer this stand-in made up. A check that starts needing more of torch
fails loudly here, naming the attribute.

The stand-in is used wherever the checks run, with or without a real torch installed, so the
checks are the same everywhere; tests/export/test_frameworks.py compares the stand-in's
answers with the real CPU torch's where one imports.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import typing
from collections.abc import Iterator

TORCH_VERSION = "2.13.0"


class TorchStubUsed(RuntimeError):
    """A placeholder of the stand-in was used as a value: the check needs more of torch."""


def _refuse(what: str) -> TorchStubUsed:
    return TorchStubUsed(f"torch stand-in (tests/export/torch_stub.py): {what} is a "
                         "placeholder, not a value; give it explicitly if a check needs it")


class Placeholder:
    """A name of torch the stand-in does not give: named further, subclassed (as a plain base
    class of its own), called (as a decorator or a factory), compared by identity; never a
    value."""

    def __init__(self, name: str) -> None:
        self._name, self._base, self._children = name, None, {}

    def __repr__(self) -> str:
        return f"<torch stand-in {self._name}>"

    def __getattr__(self, name: str) -> Placeholder:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._children.setdefault(name, Placeholder(f"{self._name}.{name}"))

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]  # used as a decorator: torch.jit.script, torch.compile(...)(f), ...
        return Placeholder(f"{self._name}(...)")

    def base(self) -> type:
        """The plain class standing for this name where a framework subclasses it."""
        if self._base is None:
            self._base = type(self._name.rsplit(".", 1)[-1], (_Base,), {"__qualname__":
                                                                          self._name})
        return self._base

    def __mro_entries__(self, bases):  # class MegatronModule(torch.nn.Module): ...
        return (self.base(),)

    def __instancecheck__(self, obj) -> bool:  # isinstance(x, torch.Tensor)
        return isinstance(obj, self.base())

    def __subclasscheck__(self, cls) -> bool:
        return isinstance(cls, type) and issubclass(cls, self.base())

    def __or__(self, other):  # annotations: torch.Tensor | None
        return typing.Union[self.base(), other]  # noqa: UP007 - other may be a placeholder's

    def __ror__(self, other):
        return typing.Union[other, self.base()]  # noqa: UP007

    def __getitem__(self, item) -> Placeholder:  # annotations: torch.Tensor[...] and the like
        return self

    def __bool__(self):
        raise _refuse(f"the truth of {self._name}")

    def __iter__(self):
        raise _refuse(f"iterating {self._name}")

    def __len__(self):
        raise _refuse(f"the length of {self._name}")

    def __int__(self):
        raise _refuse(f"{self._name} as a number")

    __float__ = __index__ = __int__

    def __lt__(self, other):
        raise _refuse(f"ordering {self._name}")

    __le__ = __gt__ = __ge__ = __lt__

    def __enter__(self):
        raise _refuse(f"{self._name} as a context")

    def __exit__(self, *exc):
        return False

    __hash__ = object.__hash__
    __eq__ = object.__eq__


class _Base:
    """What a framework's subclass of a placeholder inherits: a constructor taking anything."""

    def __init__(self, *args, **kwargs) -> None:
        pass


class dtype:  # torch's name
    """torch.dtype: one object per dtype, compared by identity as torch's are."""

    def __init__(self, name: str, itemsize: int, is_floating_point: bool) -> None:
        self.name, self.itemsize, self.is_floating_point = name, itemsize, is_floating_point

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __reduce__(self):  # pickled/copied as the same object
        return (getattr, (sys.modules["torch"], self.name))


# name: (bytes per element, floating point, aliases) — torch's own dtypes and aliases
_DTYPES = {
    "float16": (2, True, ("half",)), "bfloat16": (2, True, ()),
    "float32": (4, True, ("float",)), "float64": (8, True, ("double",)),
    "float8_e4m3fn": (1, True, ()), "float8_e5m2": (1, True, ()),
    "uint8": (1, False, ()), "int8": (1, False, ()), "int16": (2, False, ("short",)),
    "int32": (4, False, ("int",)), "int64": (8, False, ("long",)), "bool": (1, False, ()),
}


class _Module(types.ModuleType):
    """A torch module of the stand-in: explicit names first, placeholders for the rest."""

    def __getattr__(self, name: str) -> Placeholder:
        if name.startswith("__"):
            raise AttributeError(name)
        value = Placeholder(f"{self.__name__}.{name}")
        setattr(self, name, value)  # the same placeholder each time it is named
        return value


def _explicit(module: _Module) -> None:
    if module.__name__ == "torch":
        module.__version__ = TORCH_VERSION
        module.dtype = dtype
        for name, (size, floating, aliases) in _DTYPES.items():
            obj = dtype(name, size, floating)
            for alias in (name, *aliases):
                setattr(module, alias, obj)
        for sub in ("cuda", "distributed"):  # named as attributes before any import of them
            setattr(module, sub, importlib.import_module(f"torch.{sub}"))
    elif module.__name__ == "torch.cuda":
        module.is_available = lambda: False
        module.device_count = lambda: 0
    elif module.__name__ == "torch.distributed":
        module.is_available = lambda: False
        module.is_initialized = lambda: False


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers every `import torch...` with a module of the stand-in."""

    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module) -> None:
        _explicit(module)


FINDER = _Finder()


def install() -> None:
    """Make `import torch` the stand-in for the rest of this process (a process of its own,
    such as megatron_check.py's)."""
    for name in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
        del sys.modules[name]
    if FINDER not in sys.meta_path:
        sys.meta_path.insert(0, FINDER)


def _of(packages: tuple[str, ...], name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


@contextlib.contextmanager
def swapped(packages: tuple[str, ...], finders: list, kept: dict[str, types.ModuleType]
            ) -> Iterator[None]:
    """Inside the block, `packages` are the modules in `kept` (what earlier blocks loaded)
    and whatever `finders` load; outside it the process's own modules of those packages (the
    real ones, or none) are back, so other tests never see the stand-ins."""
    saved = {n: m for n, m in sys.modules.items() if _of(packages, n)}
    for name in saved:
        del sys.modules[name]
    sys.modules.update(kept)
    sys.meta_path[:0] = finders
    try:
        yield
    finally:
        del sys.meta_path[:len(finders)]
        kept.update({n: m for n, m in sys.modules.items() if _of(packages, n)})
        for name in kept:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
