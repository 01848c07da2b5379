"""Findings in the engine's own words (``analysis.findings.idioms``), on findings built by hand."""

from __future__ import annotations

import dataclasses

from eugo_lab.analysis.findings import Code, Finding
from eugo_lab.analysis.findings.idioms import ADVICE, in_engine_words

SLOW = Finding(Code.SLOW_SUBMISSION, "Slow submission", "warning",
               "The driver took 149 ms to submit 6 tasks (29.8 ms between submissions, where a .remote() takes under "
               "1 ms: it was building each input in the loop), so workers sat idle 298 ms while it did.",
               "Let each task build its own input ... hpc.map(total, inputs).",
               {"tasks": 6, "span": 0.149, "gap": 0.0298, "idle_worker_time": 0.298, "functions": ["total"],
                "cause": "building", "serializing": 0.0}, fix="let each total() task build its own input")
IO = Finding(Code.IO_BOUND, "I/O-bound", "warning", "nap() used the CPU 0% of its run time.",
             "run more workers than cores (hpc.init(workers=4))", {"function": "nap()"},
             fix="run more workers than cores (hpc.init(workers=4))")


def test_an_hpc_trace_keeps_every_word():
    assert in_engine_words([SLOW, IO], None) == [SLOW, IO]


def test_dask_words_what_it_saw_without_blaming_the_loop():
    (f,) = in_engine_words([SLOW], "dask")
    assert ".remote()" not in f.verdict and "building" not in f.verdict  # Dask's submit is not timed
    assert f.verdict == "The driver took 149 ms to submit 6 tasks (29.8 ms between submissions), so workers sat " \
                       "idle 298 ms while it did."
    assert "client.map(total, inputs)" in f.advice and "hpc" not in f.advice
    assert "client.scatter" not in f.advice  # its arguments were small: sending them once would save nothing
    assert f.evidence == SLOW.evidence and f.severity == SLOW.severity
    big = dataclasses.replace(SLOW, evidence={**SLOW.evidence, "cause": "pickling"})
    (g,) = in_engine_words([big], "dask")
    assert "client.scatter(data, broadcast=True)" in g.advice and "client.map(total, inputs)" not in g.advice


def test_ray_leaves_out_what_rests_on_cpu_time_it_never_measured():
    found = in_engine_words([SLOW, IO], "ray")
    assert [f.code for f in found] == [Code.SLOW_SUBMISSION]
    assert "ray.put(data)" not in found[0].advice  # small arguments: nothing to put
    (big,) = in_engine_words([dataclasses.replace(SLOW, evidence={**SLOW.evidence, "cause": "pickling"})], "ray")
    assert "ray.put(data)" in big.advice


def test_dask_io_bound_proposes_threads_with_the_detectors_number():
    (f,) = in_engine_words([IO], "dask")
    assert "4 in all" in f.advice and "threads_per_worker" in f.advice
    assert f.fix == "run 4 worker threads, more than cores"


def test_every_wording_names_a_real_code():
    for table in ADVICE.values():
        assert set(table) <= set(Code)


CHAIN = Finding(Code.CRITICAL_PATH, "Fan-out", "warning",
                "A chain of 8 tasks took 197 ms (82% of the run): 7 of them were passed the value the previous one "
                "returned (through the driver, by get()), ...",
                "Keep the steps in order. Passing the future itself (step.remote(fut) ...", {
                    "tasks": list(range(8)), "length": 0.197, "fraction": 0.82, "through_driver": 7,
                    "function": "step", "round_trips": 0.04}, fix="pass step()'s futures along")


def test_a_chain_through_the_driver_keeps_its_story_in_each_engines_words():
    # Not the generic "Fan out: submit independent steps together": these steps depend on each other.
    (d,) = in_engine_words([CHAIN], "dask")
    assert "Fan out" not in d.advice and "client.submit(step, fut)" in d.advice and "round trip" in d.advice
    (r,) = in_engine_words([CHAIN], "ray")
    assert "Fan out" not in r.advice and "step.remote(ray.get(ref))" in r.advice


CAPTURED = Finding(Code.CAPTURED_OBJECT, "Serialization", "warning",
                   "above() carries the global 'readings' (16 MB) inside its pickled code: ...",
                   "Store it once with ref = hpc.put(readings) and pass ref to above.remote(ref, ...), ...",
                   {"function": "above", "variable": "readings", "bytes": 16_000_000},
                   fix="pass above()'s captured 'readings' once with hpc.put")


def test_a_captured_global_is_sent_once_in_each_engines_own_call():
    (dask,) = in_engine_words([CAPTURED], "dask")
    assert "data_future = client.scatter(readings, broadcast=True)" in dask.advice
    assert "client.submit(above, data_future, ...)" in dask.advice and "hpc" not in dask.advice + dask.fix
    (ray,) = in_engine_words([CAPTURED], "ray")
    assert "ref = ray.put(readings)" in ray.advice and "above.remote(ref, ...)" in ray.advice
    assert "hpc" not in ray.advice + ray.fix and ray.verdict == CAPTURED.verdict
