"""The ``straggler`` exercise: the reference passes; a giant range left whole and crumbs do not."""

from __future__ import annotations

from _exercise_cells import run_exercise

from eugo_lab.exercises.catalog.straggler import reference_total

SETUP = """
from eugo_lab import hpc

@hpc.remote
def work(start, stop):
    return sum(i * i % 7 for i in range(start, stop))

ranges = [(i * 200_000, (i + 1) * 200_000) for i in range(7)] + [(1_400_000, 5_400_000)]
"""


def test_reference_total_is_the_sum():
    assert reference_total(1000) == sum(i * i % 7 for i in range(1000))
    assert reference_total(6) == sum(i * i % 7 for i in range(6))


def test_reference_passes():
    v = run_exercise("straggler", "pieces = [(a, min(a + 200_000, e))\n"
                                  "          for s, e in ranges for a in range(s, e, 200_000)]\n"
                                  "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n", setup=SETUP)
    assert v.passed, v.to_text()
    assert v.to_text() == ("exercise straggler: passed\n"
                           "  27 tasks, none over 3x the median; no Straggler, Long tail or Partition finding and "
                           "no Scheduling overhead finding\n"
                           "  the replay on 2 workers predicts over 1.6x; the total equals the reference")


def test_giant_range_left_whole():
    v = run_exercise("straggler", "total = sum(hpc.get([work.remote(s, e) for s, e in ranges]))\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert "one task ran far longer than the others (" in text and "Straggler" in text, text
    assert "the oversized range was left whole" in text


def test_tiny_pieces():
    v = run_exercise("straggler", "pieces = [(a, min(a + 1000, e)) for s, e in ranges for a in range(s, e, 1000)]\n"
                                  "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert text.startswith("exercise straggler: not yet\n  5400 tasks: the pieces are so small"), text
    assert "Scheduling overhead" in text


def test_pieces_that_miss_part_of_the_input():
    v = run_exercise("straggler", "total = sum(hpc.get([work.remote(s, e) for s, e in ranges[:-1]]))\n", setup=SETUP)
    assert not v.passed and "must cover every range exactly once" in v.to_text()


def test_giant_range_on_one_worker_is_still_not_yet():
    v = run_exercise("straggler", "total = sum(hpc.get([work.remote(s, e) for s, e in ranges]))\n", setup=SETUP,
                     line="-w 1 --no-live")
    assert not v.passed and "one task ran far longer than the others" in v.to_text(), v.to_text()
