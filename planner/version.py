"""rlplan's version: the installed distribution's (a source tree never installed says so)."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("rlplan")
except PackageNotFoundError:  # running from a source tree that was never installed
    VERSION = "0.0.0+unknown"
