#!/usr/bin/env bash
# Every GPU check of the performance page in one go, each with a time limit, each
# writing its own log into OUTDIR (default: gpu-checks/ in the repository, which git
# ignores; a relative OUTDIR is taken from there), so that a short lease on a
# GPU machine brings back whatever finished. Its steps, less the float16 one and the
# LSTM's breakdown and with a before/after of the update cost (--baseline), ran as one
# script in 6.5 minutes on an H100 (session 22).
#
#   bash benchmarks/gpu_checks.sh [OUTDIR]
#
# The whole suite runs in parallel when pytest-xdist is installed (the estimators train
# on CUDA by default there); the other checks run one after the other.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-checks}"
export PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
if ! "$python" -c "import torch, sys; sys.exit(not torch.cuda.is_available())"; then
    echo "gpu_checks.sh: $python's PyTorch sees no CUDA device; these checks need one (on a" \
         "machine without, python -m pytest runs the suite and skips the CUDA tests)." >&2
    exit 1
fi
mkdir -p "$out"

step() {  # step NAME SECONDS COMMAND...: run with a limit, log to OUTDIR/NAME.log
    local name=$1 limit=$2
    shift 2
    echo "== $name ($(date +%T), at most ${limit} s)"
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    echo "   exit $? ; tail: $(tail -n 1 "$out/$name.log")"
}

{
    date
    nvidia-smi -L
    "$python" -c "import torch, sklearn, skorch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'cudnn', torch.backends.cudnn.version(), 'sklearn', sklearn.__version__, 'skorch', skorch.__version__, \
torch.cuda.get_device_name())"
} >"$out/machine.txt" 2>&1

step test_cuda 120 "$python" -m pytest -q -p no:cacheprovider -rfEs tests/test_cuda.py
step update_cost 200 "$python" benchmarks/bench_update_cost.py --cell all --device cuda --repeats 3
step sync_points 60 "$python" benchmarks/bench_sync_points.py --cell tanh
step simplex_breakdown 90 "$python" benchmarks/bench_simplex_breakdown.py --cell tanh lstm --device cuda --profile
if "$python" -c "import xdist" 2>/dev/null; then
    step suite 240 "$python" -m pytest -q -p no:cacheprovider -rfE -n "$(( $(nproc) > 14 ? 14 : $(nproc) ))"
else
    step suite 540 "$python" -m pytest -q -p no:cacheprovider -rfE
fi
step update_cost_float16 90 "$python" benchmarks/bench_update_cost.py --cell all --device cuda --repeats 2 --precision float16
step lengths 60 "$python" benchmarks/bench_lengths.py --device cuda
