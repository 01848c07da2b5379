"""Exercise ``ray-wait`` (Course 1, lesson 11): take results as they finish with ``ray.wait``, in Ray's own API.

The cell is written with Ray itself (``@ray.remote``, ``.remote()``, ``ray.wait``, ``ray.get``; no
``eugo_lab.hpc``); ``%%eugo`` records it from Ray's own records and the driver's calls
(:mod:`eugo_lab.native.ray_recording`): the tasks Ray ran, every ``ray.get`` and ``ray.wait``
(each wait's refs given, ``num_returns`` asked and refs returned ready), and the values
``ray.get`` handed the notebook for each task.

The inputs come from the checker (:mod:`eugo_lab.exercises.problems`): ``p.tiles``, the tiles to
render (0-5 in the lesson), and ``p.ms``, how many milliseconds each takes (tile 0 800, the others
100); a passing cell is run again on a hidden case of 4-5 other tiles (6-99), one of them, at a place
drawn from the seed and never the first, slow (300-400 ms) and the others 40-60 ms. The slow tile
is an input, not a result the checker hands back late (:func:`~eugo_lab.exercises.problems.hold_result`):
that hold lives in eugo_lab's own runtime, which a cell in Ray's own API never goes through (Ray's
core worker completes its refs), and this exercise counts calls, not finishing order, so an input
duration keeps the lesson's story (one slow tile among quick ones) true on the hidden case too.

Starter cell (graded ``not yet``: a ``ray.get`` per tile, in submission order, waits for the slow
first tile while the others sit finished)::

    %%eugo --exercise ray-wait
    p = exercises.problem("ray-wait")  # this exercise's inputs: p.tiles and p.ms, how long each takes

    @ray.remote
    def render(tile, ms):
        time.sleep(ms / 1000)
        return int(np.random.default_rng(tile).integers(0, 256, 10_000).sum())

    refs = [render.remote(tile, ms) for tile, ms in zip(p.tiles, p.ms)]
    shown = []
    for ref in refs:
        shown.append(ray.get(ref))

(``exercises`` is imported in the lesson's first code cell: a cell that names ``eugo_lab`` is taken
for an ``hpc`` cell and not recorded from Ray.)

Reference solution: ``while refs: ready, refs = ray.wait(refs); shown.append(ray.get(ready[0]))``.

Criteria, each from the recording, on the inputs the run was handed: the tasks ran through Ray's
own API; ``shown`` holds the values of the tiles in ``p.tiles`` computed here (in any order: the
order they finish in is Ray's); one ``render`` task ran per tile; ``shown`` holds what those tasks
returned to the notebook; the results were taken through ``ray.wait``, no call but the last of
several asking for all the refs it was given, the values taken with ``ray.get`` between the waits
(not all after the last one), and those waits reported every tile ready between them. Then the
same on the hidden case.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from eugo_lab.exercises import derivation, measure, problems, steps
from eugo_lab.exercises.base import DEFAULT, Attempt, Hint, NotYet, Verdict, exercise

# The lesson's tiles, and how long each takes to render: tile 0 is the slow one.
TILES = tuple(range(6))
MS = (800, 100, 100, 100, 100, 100)
# The hidden case, sized to cost about half the lesson's: fewer tiles, other ids (so other values), one slow
# among quick ones, as in the lesson, but not the first (an order fitted to the lesson's would not match it).
# The quick ones take at most 4 x 60 ms one after another on one CPU: still done before the slow one on two.
HIDDEN_N = (4, 5)
HIDDEN_TILES = range(6, 100)
HIDDEN_SLOW_MS = range(300, 401, 10)
HIDDEN_QUICK_MS = range(40, 61, 10)
FUNCTION = "render"


@problems.declare("ray-wait")
@dataclass(frozen=True, repr=False)
class RayWaitProblem(problems.Problem):
    """The tiles to render and how many milliseconds each takes (one slow among quick ones)."""

    tiles: tuple[int, ...]
    ms: tuple[int, ...]

    @classmethod
    def make(cls, rng: random.Random, hidden: bool) -> RayWaitProblem:
        """The lesson's six tiles, tile 0 slow; hidden: 4-5 other tiles, a slow one at a place drawn, not the first."""
        if not hidden:
            return cls(TILES, MS)
        n = rng.choice(HIDDEN_N)
        tiles = tuple(rng.sample(HIDDEN_TILES, n))
        slow = rng.randrange(1, n)
        ms = tuple(rng.choice(HIDDEN_SLOW_MS) if i == slow else rng.choice(HIDDEN_QUICK_MS) for i in range(n))
        return cls(tiles, ms)


def tile_value(tile: int) -> int:
    """What ``render(tile, ms)`` returns: the sum of the tile's made-up pixel values."""
    return int(np.random.default_rng(tile).integers(0, 256, 10_000).sum())


def expected_values(p: RayWaitProblem | None = None) -> list[int]:
    """Every tile's value, in the order of ``p.tiles`` (the lesson's case by default)."""
    p = p if p is not None else problems.lesson_case("ray-wait")
    return [tile_value(t) for t in p.tiles]


_SOLUTION = ("refs = [render.remote(tile, ms) for tile, ms in zip(p.tiles, p.ms)]\n"
             "shown = []\n"
             "while refs:\n"
             "    ready, refs = ray.wait(refs)  # returns as soon as one tile is done\n"
             "    shown.append(ray.get(ready[0]))")
HINTS = {
    DEFAULT: Hint("Submit every tile first; then, while some are left, ask ray.wait for the next one that is "
                  "done, take its value with ray.get and keep waiting for the rest.", _SOLUTION),
    "not-native": Hint("Write the cell with Ray's own API: make the function a Ray remote function, submit each "
                       "tile to Ray, and take the results with ray.wait and ray.get instead of eugo_lab's calls.",
                       _SOLUTION),
    "no-ray": Hint("Run the lesson's cells above first: they start Ray. Then submit each tile to Ray as a task of "
                   "the render function.", _SOLUTION),
    "results": Hint("`shown` must hold the value of every tile in p.tiles, each once, as the render tasks return "
                    "them.", _SOLUTION),
    "local": Hint("Submit each render call, one per tile in p.tiles, to Ray as a task instead of calling it here.",
                  _SOLUTION),
    "given": Hint("Let each render task compute its tile's value: pass it only the tile and how long it takes, never "
                  "a value worked out here in the notebook.", _SOLUTION),
    "waited-first": Hint("Start the ray.wait loop right after submitting the tasks: a sleep or a wait of another "
                         "kind before it lets every tile finish first, and there is nothing left to take as it "
                         "finishes.", _SOLUTION),
    "decoy": Hint("Let `shown` hold what ray.get returns for the render tasks, not values computed here in the "
                  "notebook.", _SOLUTION),
    "get-in-order": Hint("A ray.get on one ref waits for that ref, however long it takes. Ask ray.wait which ref is "
                         "done first, and take that one.", _SOLUTION),
    "wait-for-all": Hint("Ask ray.wait for fewer refs than you give it (num_returns is 1 unless you say more), take "
                         "those, and wait again for the rest.", _SOLUTION),
    "wait-then-get-all": Hint("Keep waiting until ray.wait has handed you every tile: loop while refs are left, "
                              "taking each ready one as it comes.", _SOLUTION),
    problems.CARRY_OVER: Hint("Submit one render task for each tile in p.tiles, with its time from p.ms, and loop "
                              "while refs are left, instead of tiles, a count of them or values written into the "
                              "cell.", "p = exercises.problem(\"ray-wait\")\n" + _SOLUTION),
}


def _ray_run(a: Attempt) -> None:
    """Raise ``NotYet`` unless the cell's tasks were recorded from Ray's own API."""
    if a.trace.meta.get("api") != "ray":
        n = measure.tasks(a.trace)
        if n:
            raise NotYet(f"your cell's {measure.plural(n, 'task')} ran through eugo_lab.hpc, not Ray's own API: this "
                         "exercise is about ray.wait, so write the cell with Ray's own calls instead of eugo_lab's.",
                         mistake="not-native")
        raise NotYet("no Ray task was recorded: Ray must be running (the lesson's cells above start it) and each "
                     "tile submitted to it as a Ray task.", mistake="no-ray")


def _task_ids(trace: Any, function: str) -> list[int]:
    """Trace ids of ``function``'s tasks (first attempts)."""
    return np.asarray(trace.tasks["task_id"])[trace.first_attempts(function)].tolist()


def _first_wait_and_last_tile(trace: Any) -> tuple[float | None, float | None]:
    """When the cell's first ray.wait began, and when its last render task ended (None: not recorded)."""
    b = trace.blocks
    kinds = [trace.block_kinds[k] for k in np.asarray(b["kind"]).tolist()] if len(b["kind"]) else []
    starts = [float(s) for s, k in zip(np.asarray(b["start"]).tolist(), kinds) if k == "wait"]
    ends = np.asarray(trace.tasks["end"])[trace.first_attempts(FUNCTION)]
    ends = ends[np.isfinite(ends)]
    return (min(starts) if starts else None), (float(ends.max()) if len(ends) else None)


def _taken_as_they_finish(a: Attempt, n: int) -> None:
    """Raise ``NotYet`` unless the results came through ``ray.wait`` calls that each asked for part of what they got."""
    waits = [(int(g), int(k), int(r)) for g, k, r in a.trace.meta.get("wait_calls", ())]
    gets = [(kind, futures) for kind, futures, _ in measure.waits(a.trace) if kind == "get"]
    if not waits:
        singles = sum(1 for _, futures in gets if futures == 1)
        if singles >= n:
            # (What order the gets asked in, and whether they were given a timeout, is not recorded: not said.)
            raise NotYet(f"the cell took the {n} results with {measure.plural(singles, 'ray.get')} of one ref each, "
                         "asking for the tiles in an order of its own instead of asking Ray which were done: a "
                         "ray.get waits for the tile it names while others that finished sit ready. The cell never "
                         "called ray.wait.", mistake="get-in-order")
        raise NotYet(f"the cell took the {n} results with ray.get on many refs at once, which returns only when the "
                     "slowest of them is done: no tile was taken as it finished. The cell never called ray.wait.",
                     mistake="get-in-order")
    # A wait for all of several refs returns only when the slowest is done; the last of a loop that took the
    # others a few at a time may ask for all that are left, if no more than it asked for each time before
    # (num_returns=2 with two left), not for all the rest after taking one.
    # (A wait given a timeout returns when it runs out with whatever is ready: a poll, never a wait for all.)
    details = a.trace.meta.get("wait_details") or [{"timeout": False, "ready": None}] * len(waits)
    batch = max((k for _, k, _ in waits[:-1]), default=0)
    whole = [(g, k) for i, ((g, k, _), d) in enumerate(zip(waits, details))
             if k >= g > 1 and not d["timeout"] and not (0 < i == len(waits) - 1 and g <= batch)]
    if whole:
        g, k = whole[0]
        raise NotYet(f"the cell called ray.wait on {g} refs asking for {k} of them at once, with no timeout: that "
                     "wait returns only when all of them are done, which is what one ray.get does.",
                     mistake="wait-for-all")
    # The tiles the waits reported ready, by task (refs of other tasks, padding, are not tiles taken).
    tiles = set(_task_ids(a.trace, FUNCTION))
    if all(d["ready"] is not None for d in details):
        ready = len({t for d in details for t in d["ready"] if t in tiles})
    else:
        ready = sum(r for _, _, r in waits)
    if ready < n:
        raise NotYet(f"the cell's {measure.plural(len(waits), 'ray.wait')} reported {ready} of the {n} tiles ready "
                     "between them: the others were taken with ray.get on refs no wait had reported ready, so "
                     "those gets waited for their tiles whether or not others had finished first.",
                     mistake="wait-then-get-all")
    first_wait, last_end = _first_wait_and_last_tile(a.trace)
    if first_wait is not None and last_end is not None and first_wait >= last_end:
        raise NotYet(f"every one of the {n} tiles had finished before the cell's first ray.wait began: the cell "
                     "waited for all of them some other way first (a sleep, a loop on something else), so no tile "
                     "was taken as it finished.", mistake="waited-first")
    order = [kind for kind, _, _ in measure.waits(a.trace)]  # the driver's calls, in the order it made them
    if "get" in order and order.index("get") > len(order) - 1 - order[::-1].index("wait"):
        raise NotYet(f"the cell waited for the tiles with {measure.plural(len(waits), 'ray.wait')}, but took their "
                     "values only after the last wait, with ray.get: no tile's value was taken as it finished.",
                     mistake="wait-then-get-all")


@exercise("ray-wait", lesson="01-distributed-python/11-the-engines-own-api.ipynb",
          title="Take results as they finish with ray.wait", hints=HINTS, native_api=True)
def ray_wait(a: Attempt) -> Verdict:
    """Grade taking results as they finish: every tile's value, one task each, taken through partial ray.waits."""
    _ray_run(a)
    shown = a.require("shown")
    p = problems.given(a)  # the checker's own copy of the inputs the run was handed
    expected = expected_values(p)
    n_tiles = len(p.tiles)
    try:
        mine = Counter(int(v) for v in shown)
    except (TypeError, ValueError):
        mine = Counter()
    if mine != Counter(expected):
        return a.not_yet(f"`shown` does not hold the values of the {n_tiles} tiles, each once.", mistake="results")
    n = measure.tasks(a.trace, FUNCTION)
    if n < n_tiles:
        return a.not_yet(f"only {n} of the {n_tiles} render calls ran as Ray tasks.", mistake="local")
    came = derivation.listed(list(shown), a.trace, FUNCTION, name="shown", ordered=False)
    if not came:
        steps.from_tasks(a, came, FUNCTION, mistake="decoy")
    steps.not_handed_in(a, FUNCTION, list(shown), "shown")
    _taken_as_they_finish(a, n_tiles)
    calls = len(a.trace.meta.get("wait_calls", ()))  # (a wait with a timeout may return none: a detail, not a line)
    return a.passed(f"the {n_tiles} render tasks ran on Ray, and the cell took their results through ray.wait, a "
                    "few at a time as they were done, never all of them in one call",
                    f"those waits reported all {n_tiles} tiles ready between them, so each was taken once it was "
                    "done",
                    f"`shown` holds the {n_tiles} values the tasks returned",
                    details=(f"{measure.plural(calls, 'ray.wait call')}",))
