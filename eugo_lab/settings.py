"""The environment variables Eugo Lab reads, named once.

Each is set by a person (``EUGO_ADDRESS``, ``EUGO_LAB_DISPLAY``) or by Eugo Lab's Jupyter
server extension for the kernels it starts (the others); every module that reads or sets
one imports its name from here.
"""

from __future__ import annotations

#: An existing Dask scheduler (``tcp://host:8786``) or Ray cluster (``ray://...``) that the
#: first ``.remote()`` / ``hpc.init()`` connects to instead of starting the embedded pool.
ADDRESS_ENV = "EUGO_ADDRESS"
#: Set by the server extension: the directory where its kernels publish their runtime status.
STATUS_DIR_ENV = "EUGO_LAB_STATUS_DIR"
#: Set by the server extension: the URL path under which it serves the installed BokehJS.
BOKEH_URL_ENV = "EUGO_LAB_BOKEH_URL"
#: Forces how ``%%eugo`` displays (``live``, ``static`` or ``text``) instead of detecting it.
DISPLAY_MODE_ENV = "EUGO_LAB_DISPLAY"
#: The published GPU profile (``h100``, ``t4``...) that ``%%eugo --gpu auto`` predicts for when
#: this machine has no GPU (see :data:`eugo_lab.offload.profiles.PUBLISHED`).
GPU_PROFILE_ENV = "EUGO_LAB_GPU_PROFILE"
#: BLAS/OpenMP/Numba threads per worker process: set by a person (an explicit choice the thread
#: guard keeps), or by the driver for the workers it starts (see :mod:`eugo_lab.threadguard.limits`).
THREADS_PER_WORKER_ENV = "EUGO_THREADS_PER_WORKER"
#: Set by the driver for the workers it starts when the user set thread variables themselves
#: (``OMP_NUM_THREADS=4``...): the worker's thread guard then changes nothing.
THREADS_USER_ENV = "EUGO_THREADS_USER"
#: The folder of the learner's progress store (``progress.json``); default ``<jupyter data dir>/eugo_lab``.
#: Tests set it to a temporary folder so they never touch a real learner's progress.
PROGRESS_DIR_ENV = "EUGO_LAB_PROGRESS_DIR"
#: The GPUs the local pool gives a worker each (``0,1``; ``none`` for no GPU workers), as
#: ``hpc.init(gpus=[0, 1])`` does: set by a person to pick devices, or to run a pool with GPU
#: workers where no driver lists them (tests). Unset: the devices of ``CUDA_VISIBLE_DEVICES``,
#: else every GPU NVML finds (see :mod:`eugo_lab.backends.local_gpus`).
GPU_DEVICES_ENV = "EUGO_LAB_GPU_DEVICES"
#: The courses folder the server extension lists (``GET /eugo/api/courses``) when its
#: ``EugoLab.courses_dir`` trait is not set; unset: the server's root_dir or ``<root_dir>/courses``.
COURSES_DIR_ENV = "EUGO_LAB_COURSES_DIR"
#: The price of one worker for one hour, in your currency (``0.096``), that ``%eugo status``, the
#: status file and the JupyterLab panel bill a runtime at, unless ``hpc.init(price_per_worker_hour=...)``
#: set one. Unset: a pool on your own machine has no bill; a remote cluster is priced at an example rate.
PRICE_ENV = "EUGO_LAB_PRICE_PER_WORKER_HOUR"
#: Seconds a runtime may sit idle before the JupyterLab panel warns of an idle cluster
#: (``idle_warning_s`` in ``GET /eugo/api/status``) when ``EugoLab.idle_warning_s`` is not set; default 600.
IDLE_WARNING_ENV = "EUGO_LAB_IDLE_WARNING_S"
