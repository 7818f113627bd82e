"""rlplan: plan the parallel layout of RL post-training of LLMs on a GPU cluster.

Layers (DESIGN.md): specs → theory / cost model → search → plan → reports and exports.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rlplan")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
