"""The lessons' setup cells as the exercise tests run them: one copy each, for every test file of that exercise."""

# The lesson's setup cell (courses/05-capstone/01-tune-a-pipeline.ipynb): the inputs from p, bound to names the
# hidden second run gets the hidden case's under.
CAPSTONE_SETUP = """
import numpy as np
from eugo_lab import exercises, hpc

p = exercises.problem("capstone")
readings = p.readings
days = p.days

@hpc.remote
def gain(sensor):
    code = sum((sensor * k) % 97 for k in range(1000))
    return 0.5 + code % 1000 / 1000

@hpc.remote
def score(readings, gains, start, stop):
    total = 0.0
    for i in range(start, stop):
        total += readings[i] * gains[i % len(gains)]
    return total
"""
