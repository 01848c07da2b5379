"""The ``straggler`` exercise: the reference passes; a giant range left whole and crumbs do not."""

from __future__ import annotations

from _exercise_cells import run_exercise

from eugo_lab.exercises.catalog.straggler import reference_total

SETUP = """
from eugo_lab import hpc

@hpc.remote
def work(start, stop):
    return sum(i * i % 7 for i in range(start, stop))

ranges = [(i * 1_000_000, (i + 1) * 1_000_000) for i in range(7)] + [(7_000_000, 27_000_000)]
"""


def test_reference_total_is_the_sum():
    assert reference_total(1000) == sum(i * i % 7 for i in range(1000))
    assert reference_total(6) == sum(i * i % 7 for i in range(6))
    assert reference_total(1000, 13) == sum(i * i % 7 for i in range(13, 1000))


def test_a_lesson_may_scale_the_ranges():
    # The criteria are counts and ratios: a lesson with ranges of 400,000 is checked on its own ranges.
    setup = SETUP.replace("1_000_000", "400_000").replace("27_000_000", "8_400_000").replace("7_000_000", "2_800_000")
    v = run_exercise("straggler", "total = sum(hpc.get([work.remote(s, e) for s, e in ranges]))\n", setup=setup)
    assert not v.passed and "an ordinary range holds 400,000 numbers" in v.to_text(), v.to_text()
    v = run_exercise("straggler", "pieces = [(a, min(a + 400_000, e))\n"
                                  "          for s, e in ranges for a in range(s, e, 400_000)]\n"
                                  "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n", setup=setup)
    assert v.passed, v.to_text()


def test_reference_passes():
    v = run_exercise("straggler", "pieces = [(a, min(a + 1_000_000, e))\n"
                                  "          for s, e in ranges for a in range(s, e, 1_000_000)]\n"
                                  "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n", setup=SETUP)
    assert v.passed, v.to_text()
    assert v.to_text() == ("exercise straggler: passed\n"
                           "  27 tasks, none over 3x the median; no Straggler, Long tail or Partition finding and "
                           "no Scheduling overhead finding\n"
                           "  the replay on 2 workers predicts over 1.5x; the total equals the reference")


def test_giant_range_left_whole():
    v = run_exercise("straggler", "total = sum(hpc.get([work.remote(s, e) for s, e in ranges]))\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert "one task ran far longer than the others (" in text and "Straggler" in text, text
    assert "the oversized range was left whole" in text


def test_tiny_pieces():
    v = run_exercise("straggler", "pieces = [(a, min(a + 10_000, e)) for s, e in ranges for a in range(s, e, 10_000)]\n"
                                  "total = sum(hpc.get([work.remote(s, e) for s, e in pieces]))\n", setup=SETUP)
    text = v.to_text()
    assert not v.passed
    assert text.startswith("exercise straggler: not yet\n  2700 tasks: the pieces are so small"), text
    assert "under 200 tasks each is worth sending" in text


def test_pieces_that_miss_part_of_the_input():
    v = run_exercise("straggler", "total = sum(hpc.get([work.remote(s, e) for s, e in ranges[:-1]]))\n", setup=SETUP)
    assert not v.passed and "`total` is not the sum over all of `ranges`" in v.to_text()


def test_giant_range_on_one_worker_is_still_not_yet():
    v = run_exercise("straggler", "total = sum(hpc.get([work.remote(s, e) for s, e in ranges]))\n", setup=SETUP,
                     line="-w 1 --no-live")
    assert not v.passed and "one task ran far longer than the others" in v.to_text(), v.to_text()
