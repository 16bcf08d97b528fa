#!/usr/bin/env bash
# Build the HTML documentation the way CI does: gallery in quick mode, warnings as errors.
#   bash docs/build.sh            -> docs/_build/html/index.html
#   SKLEARN_RNN_QUICK=0 bash docs/build.sh   full-size examples (slow)
# Needs the docs extra: pip install -e ".[docs]"
set -euo pipefail
cd "$(dirname "$0")"

export SKLEARN_RNN_QUICK="${SKLEARN_RNN_QUICK:-1}"
export MPLBACKEND=Agg
# Small recurrent networks train fastest on one thread; on a busy two-core machine
# PyTorch's default of one thread per core is several times slower.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

# Start clean so that a removed page or example cannot survive from an earlier build.
rm -rf _build auto_examples api/generated
python -m sphinx -b html -W --keep-going -j 1 . _build/html "$@"
echo "docs built: $(pwd)/_build/html/index.html"
