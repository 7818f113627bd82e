"""One deadline for a whole command (`--time-limit`, `search.time_limit_s`).

A command notes when it starts (`Deadline.start`), and once the scenario is read — the limit is
one of its fields — fixes the budget (`within`): loading the files counts against it. The same
object is passed down to every step that can take long (pricing the candidates, each CP-SAT
solve, the what-ifs, the fewest-GPUs diagnosis); each asks what is `left` rather than taking a
fresh limit of its own, so the steps together stay within the one budget.

What a step cannot cut short is the allowance past the limit: pricing one task on one group
size (a numpy pass and its rollout simulations, at most a few seconds on the largest shipped
scenarios), building one CP-SAT model, and pricing the chosen plan once more at full precision.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Deadline:
    """The monotonic clock time by which a command must answer (`math.inf`: none). The
    monotonic clock is the machine's, so a deadline holds in worker processes too. The budget
    is kept as given: `ends - started` can differ from it in the last bits (30 s from a start
    of 4090.1 s is 30.000000000000455), which a plan JSON would then report."""

    started: float
    ends: float = math.inf
    budget_s: float = math.inf

    @classmethod
    def start(cls) -> Deadline:
        """Now, with no budget yet (`within` sets it)."""
        return cls(time.monotonic())

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        """A deadline `seconds` from now."""
        return cls.start().within(seconds)

    def within(self, seconds: float) -> Deadline:
        """This deadline with a budget of `seconds` from its start."""
        return Deadline(self.started, self.started + seconds, seconds)

    def left(self) -> float:
        """Seconds left (0 once past)."""
        return max(0.0, self.ends - time.monotonic())

    def expired(self) -> bool:
        return self.left() <= 0.0

    def share(self, parts: int) -> float:
        """An even share of what is left among `parts` steps still to run."""
        return self.left() / max(1, parts)

    def sooner(self, seconds: float) -> Deadline:
        """The earlier of this deadline and `seconds` from now (a step's own slice)."""
        ends = min(self.ends, time.monotonic() + seconds)
        return Deadline(self.started, ends, self.budget_s if ends == self.ends
                        else ends - self.started)
