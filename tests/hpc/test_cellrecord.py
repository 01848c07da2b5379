"""One record of "the latest cell": every accessor of the latest run reads the same record.

The mechanism alone (slots, carrying, a new trace emptying what described the old one) is
checked on hand-made records; then at the IPython level: one record per ``%%eugo`` cell, read
by ``hpc.last_trace()``, ``hpc.last_optimizations()``, ``exercises.last_verdict()``, the GPU
ledger, ``%eugo trace``'s summary; a cell that raises leaves a consistent record; an
``hpc.trace()`` block outside a cell is the latest run, as before; an ``--exercise`` cell
looks its exercise up once and transforms its source once.
"""

from __future__ import annotations

import pytest
from IPython.utils.capture import capture_output

from eugo_lab import exercises, hpc
from eugo_lab.cellrun import report, runner
from eugo_lab.contract import cellrecord
from eugo_lab.exercises import catalog
from eugo_lab.offload import cell as offload_cell
from eugo_lab.optimizations.report import OPTIMIZATIONS


@pytest.fixture
def fresh(monkeypatch):
    """No record yet, and slots declared by the test forgotten after it (the kernel's own record is kept)."""
    monkeypatch.setattr(cellrecord, "_latest", None)
    monkeypatch.setattr(cellrecord, "_open", [])
    monkeypatch.setattr(cellrecord, "_SLOTS", dict(cellrecord._SLOTS))


class FakeTrace:
    """What a record needs of a trace: ``len()`` (its repr counts rows)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __len__(self) -> int:
        return 0


# -- the mechanism -------------------------------------------------------------------------------
def test_a_new_record_carries_values_and_a_new_trace_empties_what_described_the_old_one(fresh):
    kept = cellrecord.register(cellrecord.Slot("kept", "carried from record to record"))
    about = cellrecord.register(cellrecord.Slot("about", "describes the trace", follows_trace=True))
    first = cellrecord.begin_cell()
    first.set_trace(FakeTrace("a"), "on")
    first.put(kept, "verdict 1")
    first.put(about, "report of a")
    cellrecord.end(first)
    assert cellrecord.latest() is first and not first.is_open and cellrecord.current() is None

    second = cellrecord.begin_cell()
    assert second is not first and second.number == first.number + 1
    # a cell that has not recorded yet: the previous run is still the latest, with its report
    assert second.trace is first.trace and second.jit == "on" and second.get(about) == "report of a"
    second.set_trace(FakeTrace("b"))
    assert second.get(about) is None and not second.filled(about)  # it described trace a
    assert second.get(kept) == "verdict 1"  # a plain cell keeps the last verdict
    cellrecord.end(second)
    assert first.get(about) == "report of a"  # the earlier record is unchanged


def test_a_run_set_aside_is_read_only_inside_reading_and_the_cells_own_stays_the_latest(fresh):
    # An exercise's hidden second case: it records aside, inside the cell, and its grader reads its own values.
    ledger = cellrecord.register(cellrecord.Slot("ledger", "what the run placed"))
    cell = cellrecord.begin_cell()
    cell.put(ledger, "the cell's own run")
    with cellrecord.aside() as second:
        cellrecord.contribute(ledger, "the hidden run")  # goes to the open record: the one set aside
    assert cellrecord.read(ledger) == "the cell's own run" and cellrecord.latest() is cell
    with cellrecord.reading(second):
        assert cellrecord.read(ledger) == "the hidden run"
    assert cellrecord.read(ledger) == "the cell's own run"  # the block ended: every accessor reads the cell again
    cellrecord.end(cell)
    assert cellrecord.latest() is cell

def test_a_derived_slot_is_built_once_from_the_record_and_only_for_a_trace(fresh):
    built = []
    slot = cellrecord.register(cellrecord.Slot("derived", "built on first read", follows_trace=True,
                                               derive=lambda rec: built.append(rec.trace) or f"of {rec.trace.name}"))
    rec = cellrecord.begin_region()
    assert rec.get(slot) is None and built == []  # no trace: nothing to derive from
    rec.set_trace(FakeTrace("r"))
    assert rec.get(slot) == "of r" and rec.get(slot) == "of r" and len(built) == 1
    cellrecord.end(rec)


def test_a_region_inside_an_open_record_records_there(fresh):
    cell = cellrecord.begin_cell()
    assert cellrecord.begin_region() is None and cellrecord.target() is cell
    cell.generation = 7
    assert cellrecord.generation() == 7
    cellrecord.end(cell)
    cell.generation = 0
    outer = cellrecord.begin_region()
    assert outer is not None and outer.kind == "region" and cellrecord.begin_region() is None
    cellrecord.end(outer)


def test_a_contribution_outside_any_record_goes_to_the_latest(fresh):
    slot = cellrecord.register(cellrecord.Slot("outside", "set by a script"))
    assert cellrecord.read(slot) is None
    cellrecord.contribute(slot, 1)  # no record yet: one is made
    made = cellrecord.latest()
    assert made.kind == "outside" and not made.is_open and cellrecord.read(slot) == 1
    cellrecord.contribute(slot, 2)
    assert cellrecord.latest() is made and made.get(slot) == 2
    with pytest.raises(LookupError, match="'outsde'.*declared: .*outside"):
        cellrecord.read("outsde")
    with pytest.raises(ValueError, match="unhooked, on, off"):
        made.set_trace(None, "maybe")


# -- at the IPython level --------------------------------------------------------------------------
SETUP = """
import time
from eugo_lab import exercises, hpc
p = exercises.problem("fan-out")

@hpc.remote
def slow_square(x):
    time.sleep(0.01)
    return x * x
"""
FAN_OUT = "futures = [slow_square.remote(x) for x in p.xs]\nresults = hpc.get(futures)\n"


@pytest.fixture
def text_mode(monkeypatch):
    monkeypatch.setenv("EUGO_LAB_DISPLAY", "text")


def _same_record(rec: cellrecord.CellRecord) -> None:
    """Every accessor of the latest run reads ``rec``."""
    assert cellrecord.latest() is rec
    assert hpc.last_trace() is rec.trace
    assert hpc.last_optimizations() is rec.get(OPTIMIZATIONS)
    assert exercises.last_verdict() is rec.get(exercises.VERDICT)
    assert offload_cell.last_ledger() is rec.get(offload_cell.LEDGER)


def test_one_record_per_cell_read_by_every_accessor(ip, text_mode, monkeypatch, tmp_path):
    monkeypatch.setenv("EUGO_LAB_PROGRESS_DIR", str(tmp_path / "progress"))
    ip.run_cell(SETUP)
    before = cellrecord.latest()
    looked_up, transformed = [], []
    real_get, real_transform = catalog.get, ip.transform_cell
    monkeypatch.setattr(catalog, "get", lambda i: looked_up.append(i) or real_get(i))
    monkeypatch.setattr(ip, "transform_cell", lambda c: transformed.append(c) or real_transform(c))
    with capture_output():
        ip.run_cell_magic("eugo", "--exercise fan-out -w 2 --no-live --gpu off", FAN_OUT)
    rec = cellrecord.latest()
    assert rec is not before and rec.kind == "cell" and not rec.is_open and cellrecord.current() is None
    # Looked up once; transformed once for the cell's run and once for the hidden second case's.
    assert looked_up == ["fan-out"] and transformed == [FAN_OUT, FAN_OUT]
    verdict = exercises.last_verdict()
    assert verdict is not None and verdict.passed, verdict.to_text()
    _same_record(rec)
    summary = report.latest()
    assert summary is not None and summary.trace is rec.trace and summary.optimizations is rec.get(OPTIMIZATIONS)
    assert runner.cell_source() == FAN_OUT and offload_cell.last_ledger() is None  # --gpu off

    # A plain cell: a record of its own; the last exercise cell's verdict is still the last verdict.
    monkeypatch.setattr(ip, "transform_cell", real_transform)
    with capture_output():
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off --no-optimize", "hpc.get(slow_square.remote(3))")
    plain = cellrecord.latest()
    assert plain is not rec and plain.trace is not rec.trace and exercises.last_verdict() is verdict
    _same_record(plain)
    assert hpc.last_optimizations() is None and report.latest().trace is plain.trace


def test_a_cell_that_raises_leaves_a_consistent_record(ip, text_mode, monkeypatch, tmp_path):
    monkeypatch.setenv("EUGO_LAB_PROGRESS_DIR", str(tmp_path / "progress"))
    ip.run_cell(SETUP)
    with capture_output(), pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("eugo", "--exercise fan-out -w 2 --no-live --gpu off",
                          "results = hpc.get([slow_square.remote(x) for x in range(3)])\n1 / 0\n")
    rec = cellrecord.latest()
    assert rec.kind == "cell" and not rec.is_open and cellrecord.current() is None
    _same_record(rec)
    assert len(rec.trace) == 3 and report.latest().trace is rec.trace and report.latest().error == "ZeroDivisionError"
    assert not exercises.last_verdict().passed and "ZeroDivisionError" in exercises.last_verdict().to_text()


def test_a_traced_region_outside_a_cell_is_the_latest_run_as_before(ip, text_mode):
    ip.run_cell(SETUP)
    with capture_output():
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off", "hpc.get(slow_square.remote(2))")
    cell_rec = cellrecord.latest()
    square = ip.user_ns["slow_square"]
    with hpc.trace() as t:
        assert cellrecord.current() is not cell_rec and hpc.last_trace() is cell_rec.trace  # not closed yet
        hpc.get([square.remote(x) for x in range(4)])
    region = cellrecord.latest()
    assert region.kind == "region" and not region.is_open and region is not cell_rec
    assert hpc.last_trace() is t.trace and report.latest() is None  # %eugo trace summarises the region afresh
    rep = hpc.last_optimizations()
    assert rep is region.get(OPTIMIZATIONS) and rep is hpc.last_optimizations()  # derived once, from the region
    _same_record(region)
    # a region inside a cell records into the cell's record: the cell's main run closes last
    with capture_output():
        ip.run_cell_magic("eugo", "-w 2 --no-live --gpu off",
                          "with hpc.trace() as inner:\n    hpc.get(slow_square.remote(5))\n")
    rec = cellrecord.latest()
    assert rec.kind == "cell" and hpc.last_trace() is rec.trace and rec.trace is not ip.user_ns["inner"].trace
