"""The model's hint (`cpsat.Model.hint`), appended at once, is the hint `AddHint` on each
variable gives: the same model, so the same search and the same plans."""

from __future__ import annotations

import pytest

from planner.search import cpsat
from planner.search.space import build_space
from planner.specs.scenario import load_scenario
from tests.test_plans_pinned import CASES


def _hinted_one_by_one(space, ch):
    model = cpsat.Model(space).build()
    m = model.m
    for k in range(space.slots):
        m.AddHint(model.used[k], ch.sizes[k] > 0)
        for p, s in space.shapes:
            m.AddHint(model.y[k, p, s], ch.sizes[k] == s and ch.pool(k) == p)
    for key, v in model.x.items():
        name, k, p, s, _ = key
        m.AddHint(v, ch.slot[name] == k and ch.sizes[k] == s and ch.pool(k) == p
                  and model.cand(key) is ch.candidate[name])
    for (name, k), v in model.a.items():
        m.AddHint(v, ch.slot[name] == k)
    return model


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_hint_is_the_one_addhint_gives(name):
    space, start = cpsat.by_incumbent(build_space(load_scenario(None, CASES[name])))
    assert start is not None
    hinted = cpsat.hinted_model(space, start)
    assert hinted.m.Proto().solution_hint.vars  # a hint was given
    assert str(hinted.m.Proto()) == str(_hinted_one_by_one(space, start).m.Proto())
