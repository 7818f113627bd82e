"""Work done beside the search in forked children (`planner/search/aside.py`: pricing taken in
turns, pins, the what-ifs) gives what doing it in the one process gives, and the plan does the
work itself when no child can run or a child fails."""

from __future__ import annotations

import gc
import itertools
import multiprocessing
import multiprocessing.sharedctypes
import multiprocessing.synchronize
import os
import signal
import sys
import threading
import time

import pytest

from planner.search import aside, cpsat, pins, solve, space
from planner.search.deadline import Deadline
from planner.search.solve import plan
from planner.search.space import build_space
from planner.specs.scenario import load_scenario

FORKS = sys.platform == "linux" and aside.cores() >= 2
needs_fork = pytest.mark.skipif(not FORKS, reason="a child is forked on Linux with ≥ 2 cores")

SMALL = {"algorithm": "ppo", "models.actor": "qwen2.5-0.5b", "workload.prompts_per_step": 8,
         "workload.samples_per_prompt": 2, "workload.prompt_len": 128,
         "workload.response_len": 256, "workload.max_response_len": 512,
         "cluster.gpu": "h100-sxm", "cluster.nodes": 1, "cluster.gpus_per_node": 4,
         "search.time_limit_s": 60}


def _fail() -> None:
    raise RuntimeError("broken in the child")


def _child_pid() -> int:
    return os.getpid()


@needs_fork
def test_the_child_answers_from_another_process():
    child = aside.start(_child_pid)
    assert child is not None
    ok, pid = child.result(30)
    assert ok and pid != os.getpid()
    assert not child.child.is_alive()


@needs_fork
def test_the_parent_collects_its_garbage_after_forking():
    # frozen for the fork (the child's collector leaves the shared pages alone), not after
    child = aside.start(_child_pid)
    assert gc.get_freeze_count() == 0
    child.result(30)


@needs_fork
def test_without_a_deadline_the_parent_waits_for_the_answer():
    assert aside.wait_s(None) is None
    assert aside.start(_child_pid).result(None)[0]


def test_a_large_space_priced_beside_without_a_deadline_is_the_same(monkeypatch):
    sc = load_scenario(None, {**SMALL, "cluster.nodes": 8, "cluster.gpus_per_node": 8})
    beside = build_space(sc)  # no deadline: the parent waits for the child's share
    monkeypatch.setattr(aside, "start", lambda *args, **kwargs: None)
    alone = build_space(sc)
    assert beside.candidates == alone.candidates and beside.priced == alone.priced


@needs_fork
def test_a_failing_child_says_why_and_a_slow_one_is_ended():
    ok, why = aside.start(_fail).result(30)
    assert not ok and "RuntimeError: broken in the child" in why
    slow = aside.start(time.sleep, 30)
    ok, why = slow.result(0.2)
    assert not ok and "no answer within" in why
    assert not slow.child.is_alive()  # terminated, not left behind


def test_the_what_if_beside_the_plan_says_what_it_says_after_it(monkeypatch):
    sc = load_scenario(None, SMALL)
    started = []
    real = aside.start
    monkeypatch.setattr(aside, "start", lambda *a, **k: started.append(1) or real(*a, **k))
    beside = plan(sc)
    assert started  # PPO at staleness 0, no shared critic allowed: the what-if went aside
    monkeypatch.setattr(aside, "start", lambda *a, **k: None)
    after = plan(sc)
    assert beside.explanation["what_if"] == after.explanation["what_if"]
    assert any("max_staleness 1" in note for note in after.explanation["what_if"])
    assert beside.model_dump(exclude={"search"}) == after.model_dump(exclude={"search"})


class _Died:
    """A child that died without answering (`Aside`'s interface)."""

    def result(self, timeout_s):
        return False, "the child process ended without an answer"

    def close(self):
        pass


def test_a_child_that_fails_leaves_the_what_if_to_the_plan(monkeypatch):
    sc = load_scenario(None, SMALL)
    expected = plan(sc, explain=True)
    monkeypatch.setattr(solve, "_staleness_aside", lambda *args: _Died())
    monkeypatch.setattr(solve, "_shared_aside", lambda *args: _Died())
    assert plan(sc).explanation["what_if"] == expected.explanation["what_if"]


def test_the_children_search_within_the_commands_deadline(monkeypatch):
    sc = load_scenario(None, SMALL)
    given = []
    monkeypatch.setattr(aside, "start", lambda fn, *args, **k: given.append((fn, args)) or None)
    deadline = Deadline.after(60)
    plan(sc, deadline=deadline)
    # PPO at staleness 0, no shared critic allowed: the staleness and the shared-critic
    # what-ifs, each offered to a child with the one deadline (never a limit of its own), as
    # are the pins of the options shown beside the best; the pricing's turns with the
    # pricing's share of it, as the pricing here has
    what_ifs = [args for fn, args in given if fn is solve._best_of]
    assert len(what_ifs) == 2
    assert all(deadline in args for fn, args in given if fn is not space._priced)
    assert any(fn is pins._pins for fn, _ in given)
    pricing = [args[-1] for fn, args in given if fn is space._priced]
    assert pricing and all(d.started == deadline.started and d.ends <= deadline.ends
                           for d in pricing)


def test_children_that_die_leave_their_pricing_and_pins_to_the_plan(monkeypatch):
    # a space large enough to price beside (`space.MIN_ITEMS_BESIDE`), options enough to pin,
    # every model pinned beside the solves after it (`pins.pin_beside`)
    sc = load_scenario(None, {**SMALL, "cluster.nodes": 16, "cluster.gpus_per_node": 8})
    monkeypatch.setattr(pins, "PIN_BESIDE_VARIABLES", 0)
    monkeypatch.setattr(aside, "start", lambda *args, **kwargs: None)
    alone = plan(sc, explain=False)
    offered = []
    monkeypatch.setattr(aside, "start", lambda fn, *args, **k: offered.append(fn) or _Died())
    died = plan(sc, explain=False)
    assert {fn.__name__ for fn in offered} >= {"_priced", "pin"}
    assert died.model_dump(exclude={"search"}) == alone.model_dump(exclude={"search"})


@needs_fork
def test_pins_beside_the_solves_are_the_plans_pinned_after_them(monkeypatch):
    sc = load_scenario(None, {**SMALL, "cluster.nodes": 2, "cluster.gpus_per_node": 8})
    monkeypatch.setattr(pins, "PIN_BESIDE_VARIABLES", 0)
    real, offered = aside.start, []
    monkeypatch.setattr(aside, "start",
                        lambda fn, *args, **k: offered.append(fn) or real(fn, *args, **k))
    beside = plan(sc, explain=False)
    assert cpsat.pin in offered
    monkeypatch.setattr(aside, "start", lambda *args, **kwargs: None)
    alone = plan(sc, explain=False)
    assert beside.model_dump(exclude={"search"}) == alone.model_dump(exclude={"search"})


@needs_fork
def test_turns_give_each_item_to_one_process_once():
    turns = aside.Turns(list(range(200)))
    child = aside.start(list, turns)  # the child takes what it can while this process does
    mine = list(turns)
    ok, theirs = child.result(30)
    assert ok and sorted(mine + theirs) == list(range(200))


def _from_the_back(ends: aside.Ends) -> list[int]:
    taken = []
    while (j := ends.back()) is not None:
        taken.append(j)
    return taken


@needs_fork
def test_ends_give_each_position_to_one_end_once():
    ends = aside.Ends(200)
    child = aside.start(_from_the_back, ends)
    mine = []
    while (i := ends.front()) is not None:
        mine.append(i)
    ok, theirs = child.result(30)
    assert ok and mine == list(range(len(mine)))  # the front, in order
    assert theirs == list(range(199, len(mine) - 1, -1))  # the back, in order
    assert ends.front() is None and ends.back() is None


@needs_fork
def test_what_a_pricing_child_took_and_did_not_answer_is_priced_here(monkeypatch):
    sc = load_scenario(None, {**SMALL, "cluster.nodes": 8, "cluster.gpus_per_node": 8})
    monkeypatch.setattr(aside, "start", lambda *args, **kwargs: None)
    alone = build_space(sc)
    monkeypatch.undo()
    real = aside.start

    def takes_three_and_dies(space_, turns, heads, deadline):
        list(itertools.islice(turns, 3))
        raise RuntimeError("died part way")

    monkeypatch.setattr(aside, "start", lambda fn, *args: real(
        takes_three_and_dies if fn is space._priced else fn, *args))
    died = build_space(sc)
    assert died.candidates == alone.candidates and died.priced == alone.priced


def test_without_shared_locks_the_shared_work_is_done_here(monkeypatch):
    # a platform without POSIX semaphores: no counter to share, so no turns and no ends
    sc = load_scenario(None, {**SMALL, "cluster.nodes": 16, "cluster.gpus_per_node": 8})
    monkeypatch.setattr(aside, "start", lambda *args, **kwargs: None)
    alone = plan(sc, explain=False)
    monkeypatch.undo()

    def no_semaphores(self, *args, **kwargs):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(multiprocessing.synchronize.SemLock, "__init__", no_semaphores)
    assert aside.shared(lambda: aside.Turns([1, 2])) is None
    assert aside.shared(lambda: aside.Ends(2)) is None
    assert plan(sc, explain=False).model_dump(exclude={"search"}) == alone.model_dump(
        exclude={"search"})


def test_a_child_that_cannot_start_leaves_no_pipe_open(monkeypatch):
    ctx = multiprocessing.get_context("fork")
    opened = []

    class End:
        def __init__(self):
            self.closed = False
            opened.append(self)

        def close(self):
            self.closed = True

    def no_process(self):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(aside, "possible", lambda: True)
    monkeypatch.setattr(ctx, "Pipe", lambda duplex=False: (End(), End()))
    monkeypatch.setattr(type(ctx.Process()), "start", no_process)
    assert aside.start(_child_pid) is None
    assert len(opened) == 2 and all(end.closed for end in opened)


def test_cores_are_taken_once_given_and_not_waited_for_once_unwanted():
    cores = aside.Cores(0)
    assert not cores.take(lambda: False)  # nothing wanted: no wait
    wanted = iter([True, True, False])
    assert not cores.take(lambda: next(wanted))  # none given: gives up once unwanted
    cores.give()
    assert cores.take(lambda: True)
    wanted = iter([True, True, False])
    assert not cores.take(lambda: next(wanted))  # the one given is taken already


def test_least_keeps_the_least_reported():
    least = aside.Least()
    assert least.get() is None
    for x in (7, 9, 3, 5):
        least.lower(x)
    assert least.get() == 3


def _grandchild_then_wait(pid: multiprocessing.sharedctypes.Synchronized) -> None:
    grandchild = aside.start(time.sleep, 60)
    assert grandchild is not None  # a nested child may start children of its own
    pid.value = grandchild.child.pid
    time.sleep(60)


@needs_fork
def test_a_nested_child_ends_its_own_children_when_it_is_ended():
    pid = multiprocessing.get_context("fork").Value("q", 0)
    child = aside.start(_grandchild_then_wait, pid, nested=True)
    deadline = time.monotonic() + 30
    while not pid.value and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pid.value
    child.close()  # terminated: it ends its child first
    # a deadline of its own: on a loaded machine the start can take most of the first one
    deadline = time.monotonic() + 30
    while _alive(pid.value) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(pid.value), "the grandchild outlived its parent"


def _sigterm_is_the_kernels() -> bool:
    return signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


@needs_fork
def test_a_child_does_not_keep_a_sigterm_handler_inherited_through_the_fork():
    """A Python handler cannot run while the child is stuck on a lock a thread of the forked
    process held: the child is ended by the kernel's default action instead."""
    before = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        child = aside.start(_sigterm_is_the_kernels)
        assert child is not None and child.result(30) == (True, True)
    finally:
        signal.signal(signal.SIGTERM, before)


def _deaf_to_sigterm(pid: multiprocessing.sharedctypes.Synchronized) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pid.value = os.getpid()
    time.sleep(60)


@needs_fork
def test_close_ends_a_child_that_does_not_answer_sigterm(monkeypatch):
    monkeypatch.setattr(aside, "GRACE_S", 0.2)
    pid = multiprocessing.get_context("fork").Value("q", 0)
    child = aside.start(_deaf_to_sigterm, pid)
    deadline = time.monotonic() + 30
    while not pid.value and time.monotonic() < deadline:
        time.sleep(0.01)
    closing = threading.Thread(target=child.close)  # a wait without end would hang the test
    closing.start()
    closing.join(30)
    assert not closing.is_alive(), "close() waited on a child that ignores SIGTERM"
    assert child.child.exitcode == -signal.SIGKILL


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@needs_fork
def test_a_what_ifs_last_options_solved_beside_give_the_same_answer():
    """The staleness what-if's options, their last ones solved from the back in a child once
    a core is idle (`last.least_from_the_back`), give the least objective and settledness
    solving them in turn gives."""
    sc = load_scenario(None, SMALL)
    opts = solve._staleness_options(sc, False, None)
    assert len(opts) > 2
    alone = solve._best_of(sc, opts, Deadline.after(60), 1, None)
    beside = solve._best_of(sc, opts, Deadline.after(60), 1, None, idle=aside.Cores(1))
    assert beside == alone and alone[1]
