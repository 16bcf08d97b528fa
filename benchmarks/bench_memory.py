"""Memory of repeated fits and of large-scale inference, measured as resident set size.

1. Flat memory over repeated models: fit and predict 20 models in a loop (each on its
   own ragged data set, then dropped) and record the RSS after every iteration. The
   least-squares slope over iterations after a short warm-up should be about zero; a
   leak (a model kept alive by a global, a growing cache) shows as a steady slope.
2. Bounded inference: ``predict_proba`` on 1,000,000 short sequences (2 to 8 steps of
   2 features). A sampling thread records the peak RSS during the call; the report
   gives it against the size of the data (the float64 values of all steps, and the
   memory the input list takes: for sequences this short, one numpy array object per
   sequence outweighs its values), and the time. Prediction validates all sequences
   into one new array (views per sequence, like the input), then encodes and runs the
   network 65,536 sequences at a time, in batches of ``batch_size``: the extra memory
   grows linearly with the data, with nothing quadratic.

Usage: ``python benchmarks/bench_memory.py [--models 20] [--sequences 1000000]``
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import threading
import time
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from sklearn_rnn import RNNClassifier

MIB = 2**20


def rss_bytes() -> int:
    """Current resident set size of this process."""
    try:
        import psutil
    except ImportError:  # Linux without psutil
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return psutil.Process().memory_info().rss


class PeakSampler:
    """Sample the RSS every ``interval`` seconds in a thread; keep the maximum."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(self.interval)

    def __enter__(self) -> PeakSampler:
        self.peak = rss_bytes()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


def ragged(n: int, seed: int, low: int = 2, high: int = 9) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(low, high, size=n)
    steps = rng.normal(size=(int(lengths.sum()), 2))
    X = np.split(steps, np.cumsum(lengths)[:-1])
    y = np.array([int(x[:, 0].sum() > 0) for x in X])
    return X, y


def repeated_models(n_models: int) -> dict[str, float]:
    rss = []
    for index in range(n_models):
        X, y = ragged(400, seed=index)
        model = RNNClassifier(hidden_size=16, max_iter=5, random_state=index, device="cpu")
        model.fit(X, y).predict_proba(X)
        del model, X, y
        gc.collect()
        rss.append(rss_bytes())
    warm_up = min(3, n_models - 2)
    iterations = np.arange(warm_up, n_models)
    slope = np.polyfit(iterations, np.array(rss[warm_up:]) / MIB, 1)[0]
    return {
        "first_mib": rss[0] / MIB,
        "last_mib": rss[-1] / MIB,
        "slope_mib_per_model": float(slope),
    }


def large_inference(n_sequences: int) -> dict[str, float]:
    X_train, y_train = ragged(2000, seed=1)
    model = RNNClassifier(hidden_size=16, max_iter=5, random_state=0, device="cpu").fit(
        X_train, y_train
    )
    gc.collect()
    empty = rss_bytes()
    X, _ = ragged(n_sequences, seed=2)
    data_bytes = sum(x.nbytes for x in X)
    gc.collect()
    before = rss_bytes()  # the input list: its float data plus one array object a sequence
    start = time.perf_counter()
    with PeakSampler() as sampler:
        proba = model.predict_proba(X)
    seconds = time.perf_counter() - start
    assert np.isfinite(proba).all() and proba.shape == (n_sequences, 2)
    return {
        "data_mib": data_bytes / MIB,
        "input_mib": (before - empty) / MIB,
        "rss_before_mib": before / MIB,
        "peak_rss_mib": sampler.peak / MIB,
        "peak_increase_mib": (sampler.peak - before) / MIB,
        "increase_over_data": (sampler.peak - before) / data_bytes,
        "increase_over_input": (sampler.peak - before) / (before - empty),
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--sequences", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        loop = repeated_models(args.models)
        print(f"{args.models} fit+predict models: RSS {loop['first_mib']:.1f} -> "
              f"{loop['last_mib']:.1f} MiB, slope {loop['slope_mib_per_model']:+.3f} MiB/model")
        big = large_inference(args.sequences)
    print(f"predict_proba on {args.sequences:,} sequences ({big['data_mib']:.1f} MiB of steps, "
          f"the input list takes {big['input_mib']:.0f} MiB): peak RSS "
          f"{big['peak_rss_mib']:.0f} MiB, +{big['peak_increase_mib']:.0f} MiB over the "
          f"{big['rss_before_mib']:.0f} MiB before the call ({big['increase_over_data']:.2f} x "
          f"the steps, {big['increase_over_input']:.2f} x the input list), {big['seconds']:.1f} s")


if __name__ == "__main__":
    main()
