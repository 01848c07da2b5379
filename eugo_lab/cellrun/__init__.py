"""What ``%%eugo`` does, apart from IPython plumbing: options, running a cell traced, live feed, summary.

``eugo_lab.magics`` only parses the line and calls :func:`eugo_lab.cellrun.runner.run_cell`.
"""
