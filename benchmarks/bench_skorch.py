"""Against the usual alternative: skorch's NeuralNetClassifier wrapping ``nn.RNN`` on padded data.

The same data for both, side by side in one run: variable-length sequences (log-normal
lengths, median 20, clipped to 2..200), 2 features, the label is whether the first
feature sums to more than zero over the sequence. Both train a one-layer tanh network
of 32 units with Adam (learning rate 0.01, gradient norm clipped at 1), batches of 32,
for the same number of epochs, and are scored on the same held-out sequences:

- ``RNNClassifier``: ragged input as it is, batches of similar lengths;
- skorch: the sequences zero-padded to the longest into one ``(n, T, 2)`` array, a module
  of ``nn.RNN`` + ``nn.Linear`` that reads each sequence at its last valid step (given its
  lengths: the fair version; reading the last padded step would also cost accuracy),
  random batches as skorch draws them.

Reported: fit time, accuracy, the machine.

Usage::

    python benchmarks/bench_skorch.py --threads 1     # 4,000 sequences, 20 epochs
    python benchmarks/bench_skorch.py --quick         # 1,000 sequences, 5 epochs
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from skorch import NeuralNetClassifier
from skorch.callbacks import GradientNormClipping

from sklearn_rnn import RNNClassifier

FEATURES, HIDDEN, BATCH, LR = 2, 32, 32, 0.01


def sequences(n: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = np.clip(np.round(rng.lognormal(np.log(20), 1.0, size=n)), 2, 200).astype(int)
    X = [rng.normal(size=(length, FEATURES)).astype(np.float32) for length in lengths]
    return X, np.array([int(x[:, 0].sum() > 0) for x in X])


def padded(X: list[np.ndarray]) -> dict[str, np.ndarray]:
    lengths = np.array([len(x) for x in X])
    out = np.zeros((len(X), lengths.max(), FEATURES), dtype=np.float32)
    for i, x in enumerate(X):
        out[i, : len(x)] = x
    return {"x": out, "lengths": lengths}


class PaddedRNN(torch.nn.Module):
    """``nn.RNN`` over zero-padded batches, read at each sequence's last valid step."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.RNN(FEATURES, HIDDEN, batch_first=True)
        self.readout = torch.nn.Linear(HIDDEN, 2)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(x)  # (B, T, H)
        last = hidden[torch.arange(len(x)), lengths.long() - 1]  # (B, H)
        return self.readout(last)  # (B, 2) logits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequences", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="1,000 sequences, 5 epochs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    n, epochs = (1000, 5) if args.quick else (args.sequences, args.epochs)
    X, y = sequences(n, seed=0)
    X_test, y_test = sequences(2000, seed=1)
    # Warm-ups: the first fit of a process pays PyTorch's lazy imports (torch._dynamo, ~3 s).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        RNNClassifier(hidden_size=2, max_iter=1).fit(X[:40], y[:40])
    NeuralNetClassifier(
        PaddedRNN, criterion=torch.nn.CrossEntropyLoss, optimizer=torch.optim.Adam, max_epochs=1,
        train_split=None, verbose=0,
    ).fit(padded(X[:40]), y[:40])

    ours = RNNClassifier(  # a one-layer tanh network on every step, all data trained on
        hidden_size=HIDDEN, cell="tanh", spectral_radius=1.2, early_stopping=False, frame=1,
        readout="last", conv_kernels=None,  # the padded skorch module's network
        optimizer="adam", learning_rate=LR, clip_threshold=1.0,
        batch_size=BATCH, max_iter=epochs, tol=0.0, device="cpu", random_state=0,
        label_smoothing=0.0,  # skorch's plain nn.CrossEntropyLoss
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours.fit(X, y)
    ours_time = time.perf_counter() - start
    ours_accuracy = ours.score(X_test, y_test)

    torch.manual_seed(0)  # benchmark script, not library code
    theirs = NeuralNetClassifier(
        PaddedRNN, criterion=torch.nn.CrossEntropyLoss, optimizer=torch.optim.Adam, lr=LR,
        batch_size=BATCH, max_epochs=epochs, train_split=None, iterator_train__shuffle=True,
        callbacks=[GradientNormClipping(1.0)], verbose=0, device="cpu",
    )
    start = time.perf_counter()
    theirs.fit(padded(X), y)
    theirs_time = time.perf_counter() - start
    test = padded(X_test)
    theirs_accuracy = float((theirs.predict(test) == y_test).mean())

    lengths = np.array([len(x) for x in X])
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {args.threads} threads")
    print(f"{n} training sequences (lengths median {np.median(lengths):.0f}, max {lengths.max()}), "
          f"2,000 test sequences, {epochs} epochs, {HIDDEN} tanh units, batch {BATCH}, Adam")
    print(f"RNNClassifier:          fit {ours_time:7.2f} s, test accuracy {ours_accuracy:.3f}")
    print(f"skorch + nn.RNN padded: fit {theirs_time:7.2f} s, test accuracy {theirs_accuracy:.3f}")
    print(f"fit time ratio skorch / RNNClassifier: {theirs_time / ours_time:.1f}")


if __name__ == "__main__":
    main()
