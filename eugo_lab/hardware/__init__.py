"""What compute this machine has, described for the engines, GPU offload and the cell summary.

- :mod:`~eugo_lab.hardware.gpus`: ``detect_gpus()`` (NVML, then CuPy; never raises), ``driver_absent()``;
- :mod:`~eugo_lab.hardware.cpu`: ``describe_cpu()`` and the parsed ``/proc/cpuinfo``.

A leaf of the package: it imports nothing of eugo_lab, so the engines can describe their
workers without importing a feature (offload, the JIT, the thread guard). Nothing heavy
loads here; pynvml and CuPy are imported inside the functions that need them.
"""
