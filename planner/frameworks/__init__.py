"""Framework presets as data: one YAML file per release (`presets/<framework>@<version>.yaml`),
each value with its source, loaded into the runtime defaults the cost model prices and the
`Capabilities` the search and the exporters use (README "Frameworks and presets")."""

from planner.frameworks.capabilities import Capabilities, GroupPattern, Options, Rule
from planner.frameworks.presets import (
    Preset,
    all_presets,
    capabilities,
    framework_runtime,
    load_preset,
    parse_name,
    release_of,
    releases,
)

__all__ = ["Capabilities", "GroupPattern", "Options", "Preset", "Rule", "all_presets",
           "capabilities", "framework_runtime", "load_preset", "parse_name", "release_of",
           "releases"]
