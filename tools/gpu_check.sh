#!/usr/bin/env bash
# `make gpu-check`: the GPU tests (CuPy, NVML, calibration, model vs measured crossovers within 2x,
# the report's CUDA-event times, a GPU worker of the local pool) and the crossover table for
# benchmarks/RESULTS.md, on a machine with an NVIDIA GPU, in under 5 minutes.
#
# Which Python runs them:
#   1. $GPU_PY, when set;
#   2. else the machine's python3, when it already has CuPy, the NVML bindings, Numba and pytest
#      (a GPU image): nothing is installed, so this works with no network, and eugo_lab runs from
#      this checkout (PYTHONPATH);
#   3. else this checkout's .venv, with the gpu extra installed into it (needs the package index).
set -u
cd "$(dirname "$0")/.."

fail() { echo "gpu-check: $*"; exit 1; }

if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu-check: no NVIDIA GPU here (nvidia-smi not found); run it on a GPU machine."
    echo "Anywhere: python -m benchmarks.gpu_crossover --predict-only"
    exit 1
fi
nvidia-smi -L

# What the GPU tests import besides eugo_lab's own modules (the core dependencies, pytest, the gpu extra).
needs="import cupy, pynvml, numba, pytest, numpy, pandas, cloudpickle, psutil, threadpoolctl"
if [ -n "${GPU_PY:-}" ]; then
    py=$GPU_PY
elif python3 -c "$needs" >/dev/null 2>&1; then
    py=python3
else
    make -s .venv/bin/python || fail "could not create .venv"
    timeout 120 .venv/bin/python -m pip install -q -e ".[gpu,test]" \
        || fail "installing the gpu extra failed or timed out (no package index here? set GPU_PY to a Python with CuPy)"
    py=.venv/bin/python
fi
if ! out=$("$py" -c "$needs" 2>&1); then
    fail "$py lacks what the GPU tests import: $(printf '%s\n' "$out" | tail -1)"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
echo "gpu-check: $("$py" -c 'import sys; print(sys.executable, "Python", sys.version.split()[0])')"

timeout 150 "$py" -m pytest -q -p no:cacheprovider -o addopts="" -rs tests/offload/test_offload_gpu.py tests/offload/test_offload_kernels.py \
    || fail "GPU tests failed (or took over 150 s)"
mkdir -p benchmarks/results
timeout 100 "$py" -m benchmarks.gpu_crossover --budget 75 > benchmarks/results/gpu_crossover.md
rc=$?
cat benchmarks/results/gpu_crossover.md
[ $rc -eq 0 ] || fail "the crossover table failed (exit $rc; 124: over 100 s)"
