"""The cell room (sklearn_rnn/nn/cells/): every cell is one registered object, asked, never named.

A cell defined here, in the test module, is registered and fitted through the whole
stack (network, initialization, estimator, persistence, and for a fused-kernel cell the
temporal gradients and the simplex optimizer); an AST check keeps the rest of the
package from branching on cell names.
"""

from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest
import torch
from torch import nn

import sklearn_rnn
from sklearn_rnn import RNNClassifier, RNNRegressor
from sklearn_rnn.nn import CELLS, Cell, RecurrentNetwork, get_cell, register_cell, unregister_cell
from sklearn_rnn.nn.cells import ElmanCell, LayerStates, cell_names, reset_affine_, resolve_cell
from sklearn_rnn.optim import temporal_gradients

from _helpers import convergence_warning_allowed

PACKAGE = pathlib.Path(sklearn_rnn.__file__).parent
ROOM = PACKAGE / "nn" / "cells"
BUILTIN = ("tanh", "relu", "gru", "lstm", "decay")


# ------------------------------------------------------------------ no branches on names
def _names_in(node: ast.AST) -> set[str]:
    """The string constants of a comparison operand (one, or a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names_in(element) for element in node.elts)) if node.elts else set()
    return set()


def _mentions_cell(node: ast.AST) -> bool:
    """Whether an operand reads something called cell (``cell``, ``self.cell``, ``_resolved_cell()``)."""
    for sub in ast.walk(node):
        name = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else ""
        if "cell" in name.lower():
            return True
    return False


def cell_branches(source: str) -> list[str]:
    """Comparisons of a cell against names, isinstance checks of a cell's classes, and
    dict literals keyed by cell names, in ``source``: one line each."""
    cell_classes = {"DecayRecurrence", "DecayCell", "ElmanCell", "GRUCell", "LSTMCell", "FusedCell"}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = set().union(*(_names_in(operand) for operand in operands))
            membership = isinstance(node.ops[0], (ast.In, ast.NotIn)) and _mentions_cell(node.left)
            if named & set(BUILTIN) or membership or (named and any(_mentions_cell(o) for o in operands)):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("isinstance", "issubclass"):
            classes = {getattr(sub, "id", getattr(sub, "attr", None)) for sub in ast.walk(node.args[1])}
            if classes & cell_classes:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict):
            keys = {key.value for key in node.keys if isinstance(key, ast.Constant)}
            if len(keys & set(BUILTIN)) >= 2:
                found.append(f"line {node.lineno}: a dict keyed by cell names")
    return sorted(found, key=lambda line: int(line.split(":")[0].split()[1]))


def test_the_check_finds_what_it_looks_for():
    source = (
        "if cell == 'decay': pass\n"
        "if self._resolved_cell() in ('gru', 'lstm'): pass\n"
        "if network.cell not in GATES: pass\n"
        "if mode != 'relu': pass\n"
        "if isinstance(recurrence, (nn.LSTM, DecayRecurrence)): pass\n"
        "GATES = {'tanh': 1, 'gru': 3}\n"
        "if self.optimizer == 'simplex' and precision != 'float32' and n in sizes: pass\n"
    )
    found = cell_branches(source)
    assert [line.split(":")[0] for line in found] == [f"line {k}" for k in range(1, 7)]


def test_no_module_outside_the_cell_room_branches_on_a_cell():
    outside = [path for path in PACKAGE.rglob("*.py") if ROOM not in path.parents]
    assert len(outside) > 30 and PACKAGE / "_estimators.py" in outside
    found = {
        str(path.relative_to(PACKAGE)): lines
        for path in outside
        if (lines := cell_branches(path.read_text()))
    }
    assert not found, f"ask the cell object (sklearn_rnn/nn/cells/) instead: {found}"


# ------------------------------------------------------------------ the registry
def test_the_registry_describes_every_builtin_cell():
    assert list(CELLS)[:5] == list(BUILTIN)
    gates = {name: get_cell(name).gates for name in BUILTIN}
    assert gates == {"tanh": 1, "relu": 1, "gru": 3, "lstm": 4, "decay": 1}
    assert cell_names(temporal_gradients=True)[:4] == ["tanh", "relu", "gru", "lstm"]
    assert cell_names(stackable=True) == list(BUILTIN) and cell_names(needs_gaps=True) == ["decay"]
    for name in BUILTIN:
        cell = get_cell(name)
        recurrence = cell.make_recurrence(3, n_masked=1)
        projection = nn.Linear(2, cell.gates * 3)
        cell.reset_parameters(projection, recurrence, spectral_radius=1.2, generator=torch.Generator().manual_seed(0))
        assert cell.recurrent_weight(recurrence).shape == (cell.gates * 3, 3)
        if cell.torch_mode is not None:  # the PyTorch module of this cell
            assert recurrence.mode == cell.torch_mode
    # Pickled by name (as a class is): the registered object comes back.
    import pickle

    assert pickle.loads(pickle.dumps(get_cell("gru"))) is get_cell("gru")


def test_registering_refuses_what_would_be_ambiguous():
    with pytest.raises(ValueError, match="already registered"):
        register_cell(ElmanCell("tanh", nonlinearity="tanh"))
    with pytest.raises(ValueError, match="cannot be named 'auto'.*choose another name"):
        register_cell(ElmanCell("auto", nonlinearity="tanh"))  # said 'already registered (None)'
    assert "auto" not in CELLS
    with pytest.raises(TypeError, match="Cell instance"):
        register_cell("tanh")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nonlinearity must be 'tanh' or 'relu'"):
        ElmanCell("softsign", nonlinearity="softsign")
    with pytest.raises(ValueError, match="no cell named 'elman'"):
        unregister_cell("elman")

    class Unfinished(Cell):
        name = "unfinished"

    with pytest.raises(TypeError, match="abstract method"):
        Unfinished()


def test_the_grus_reset_gates_recomputed_after_a_fused_kernel_match_the_kept_ones():
    """On a GPU the fused kernel keeps no reset gates; the GRU cell recomputes them."""
    net = RecurrentNetwork(2, 4, 1, cell="gru", generator=torch.Generator().manual_seed(0))
    x, lengths = torch.randn(3, 6, 2, generator=torch.Generator().manual_seed(1)), torch.tensor([6, 5, 2])
    layer = net.forward_states(x, lengths).layers[0]
    assert layer.resets is not None  # the CPU's step-by-step recurrence kept them
    delta = torch.randn(6, 3, 12, generator=torch.Generator().manual_seed(2))  # (T, B, 3H)
    hidden = layer.hidden.detach().transpose(0, 1)  # (T, B, H)
    previous = torch.cat([torch.zeros_like(hidden[:1]), hidden[:-1]])
    cell, _, recurrence = net.stack()[0]
    kept = cell.recurrent_deltas(delta, layer, previous, recurrence.weight_hh_l0, recurrence.bias_hh_l0)
    again = cell.recurrent_deltas(delta, layer._replace(resets=None), previous, recurrence.weight_hh_l0,
                                  recurrence.bias_hh_l0)
    torch.testing.assert_close(again, kept)
    torch.testing.assert_close(kept[..., :8], delta[..., :8])  # r and z blocks: dL/du itself
    assert not torch.allclose(kept[..., 8:], delta[..., 8:])  # the candidate's: gated by r
    assert get_cell("lstm").recurrent_deltas(delta, layer, previous, recurrence.weight_hh_l0, None) is None


def test_auto_asks_the_registry():
    assert resolve_cell("auto", timed=True, simplex=False) == "decay"
    assert resolve_cell("auto", timed=False, simplex=True) == "tanh"
    assert resolve_cell("auto", timed=False, simplex=False, thesis=True) == "tanh"
    assert resolve_cell("auto", timed=False, simplex=False) == "gru"
    assert RNNClassifier(cell="lstm")._resolved_spectral_radius() is None
    assert RNNClassifier(cell="relu")._resolved_spectral_radius() == 1.2
    assert RNNClassifier(cell="decay", time_feature=0)._resolved_alpha() == 10.0


# ------------------------------------------------------------------ a cell of our own
class LeakyRecurrence(nn.Module):
    """``h_t = (h_{t-1} + tanh(u_t + W h_{t-1})) / 2``, in plain tensor operations."""

    def __init__(self, hidden_size: int, *, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size, device=device))

    def forward(self, projected: torch.Tensor) -> torch.Tensor:
        state = projected.new_zeros(projected.shape[0], self.hidden_size)  # (B, H)
        states = []
        for u in projected.unbind(1):
            state = 0.5 * state + 0.5 * torch.tanh(u + state @ self.weight_hh.T)
            states.append(state)
        return torch.stack(states, dim=1)  # (B, T, H)


class LeakyCell(Cell):
    """A leaky Elman cell: no fused kernel, so no temporal gradients."""

    name = "leaky"
    learned_initial = False

    def make_recurrence(self, hidden_size, *, n_masked=0, device=None):
        return LeakyRecurrence(hidden_size, device=device)

    def reset_parameters(self, projection, recurrence, *, spectral_radius, generator):
        reset_affine_(projection, recurrence.weight_hh, spectral_radius, generator)

    def recurrent_weight(self, recurrence):
        return recurrence.weight_hh

    def forward_states(self, projection, recurrence, z, initial, gaps):
        projected = projection(z)  # (B, T, H)
        return LayerStates(z, projected, recurrence(projected), ())


def sum_task(n=80, seed=0):
    """Whether the first feature sums to more than zero: 3-8 steps of 2 features."""
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(3, 9)), 2)) for _ in range(n)]
    return X, np.array([int(x[:, 0].sum() > 0) for x in X])


def test_a_cell_defined_here_fits_an_estimator(tmp_path):
    X, y = sum_task()
    leaky = register_cell(LeakyCell())
    try:
        with convergence_warning_allowed():
            clf = RNNClassifier(cell="leaky", num_layers=2, hidden_size=8, max_iter=40, random_state=0).fit(X, y)
        assert [cell for cell, _, _ in clf.module_.stack()] == [leaky, leaky]  # upper=None: itself
        assert isinstance(clf.module_.recurrence, LeakyRecurrence) and clf.module_.cell == "leaky"
        assert clf.module_.spectral_radius == 1.2  # 'auto' asked the cell
        assert clf.score(X, y) > 0.85
        # Saved and loaded: the file names the cell; loading rebuilds it from the registry.
        clf.save(tmp_path / "leaky.model")
        np.testing.assert_array_equal(sklearn_rnn.load(tmp_path / "leaky.model").predict_proba(X), clf.predict_proba(X))
        # What the cell does not support is refused, naming it.
        with pytest.raises(ValueError, match="cell='leaky' has none"):
            RNNClassifier(cell="leaky", optimizer="simplex", max_iter=1).fit(X, y)
        with pytest.raises(ValueError, match="not available for cell='leaky'"):
            RNNClassifier(cell="leaky", hidden_init="learned", max_iter=1).fit(X, y)
        # Not stackable (the default): the stacked search refuses it, naming the cells it runs.
        from sklearn_rnn._stacked import check_stackable

        with pytest.raises(ValueError, match="runs the cells 'tanh', .*; got cell='leaky', which has none"):
            check_stackable(RNNClassifier(cell="leaky", optimizer="sgd"))
        net = clf.module_
        device = next(net.parameters()).device  # a GPU where there is one (device='auto')
        lengths = torch.tensor([4, 2, 1], device=device)
        states = net.forward_states(torch.randn(3, 4, 2, device=device), lengths)
        with pytest.raises(ValueError, match="temporal gradients are not available for cell='leaky'"):
            temporal_gradients(net, states, states.outputs.sum(), lengths)
    finally:
        unregister_cell("leaky")
    assert "leaky" not in CELLS
    with pytest.raises(ValueError, match="'cell' parameter of RNNRegressor"):
        RNNRegressor(cell="leaky").fit(X, y.astype(float))


class OrthogonalTanh(ElmanCell):
    """The Elman 'tanh' cell with an orthogonal ``W_rec`` scaled to the radius."""

    def __init__(self) -> None:
        super().__init__("tanh_orthogonal", nonlinearity="tanh")

    def reset_parameters(self, projection, recurrence, *, spectral_radius, generator):
        super().reset_parameters(projection, recurrence, spectral_radius=spectral_radius, generator=generator)
        size = recurrence.hidden_size
        q, _ = torch.linalg.qr(torch.randn(size, size, generator=generator, dtype=torch.float64))
        with torch.no_grad():
            recurrence.weight_hh_l0.copy_(q * (spectral_radius or 1.0))


def test_a_fused_cell_defined_here_gets_temporal_gradients_and_the_simplex_optimizer():
    register_cell(OrthogonalTanh())
    try:
        net = RecurrentNetwork(2, 6, 1, cell="tanh_orthogonal", num_layers=2, spectral_radius=1.1,
                               generator=torch.Generator().manual_seed(0))
        for cell, _, recurrence in net.stack():
            moduli = torch.linalg.eigvals(recurrence.weight_hh_l0.detach().double()).abs()
            torch.testing.assert_close(moduli, torch.full_like(moduli, 1.1))
        x, lengths = torch.randn(4, 5, 2, generator=torch.Generator().manual_seed(1)), torch.tensor([5, 4, 2, 1])
        states = net.forward_states(x, lengths)
        assert type(states.projected.grad_fn).__name__ == "RecurrentWeightsBackward"  # its step-by-step path
        tg = temporal_gradients(net, states, states.outputs.square().sum(), lengths)
        expected = torch.autograd.grad(net(x, lengths).square().sum(), net.recurrent_weight)[0]
        torch.testing.assert_close(tg.gradient[0], expected, rtol=1e-5, atol=1e-6)
        X, y = sum_task()
        with convergence_warning_allowed():
            clf = RNNClassifier(cell="tanh_orthogonal", optimizer="simplex", hidden_size=8, max_iter=30,
                                random_state=0).fit(X, y)
        assert clf.score(X, y) > 0.9 and clf.branch_counts_["simplex"] > 0
    finally:
        unregister_cell("tanh_orthogonal")


def test_copies_run_the_cell_the_network_was_built_with(tmp_path):
    # Only pickles look a cell up by name: a deep copy (which predict makes on every
    # call) keeps the object, so unregistering or re-registering the name changes nothing.
    import copy
    import pickle

    X, y = sum_task(n=24)
    register_cell(ElmanCell("mine", nonlinearity="relu"))
    try:
        net = RecurrentNetwork(2, 3, 1, cell="mine", generator=torch.Generator().manual_seed(0))
        with convergence_warning_allowed():
            clf = RNNClassifier(cell="mine", hidden_size=4, max_iter=3, random_state=0).fit(X, y)
        proba = clf.predict_proba(X[:4])
    finally:
        unregister_cell("mine")
    x, lengths = torch.randn(2, 3, 2, generator=torch.Generator().manual_seed(1)), torch.tensor([3, 1])
    expected = net(x, lengths)
    twin = copy.deepcopy(net)  # the name is no longer registered
    assert twin._cell is net._cell and copy.copy(net._cell) is net._cell
    torch.testing.assert_close(twin(x, lengths), expected)
    np.testing.assert_array_equal(clf.predict_proba(X[:4]), proba)
    with pytest.raises(ValueError, match=r"ran the cell 'mine' as ElmanCell\(.*nonlinearity='relu'.*\), which is not "
                                         r"registered in this session"):
        pickle.loads(pickle.dumps(net))  # a pickle names the cell
    register_cell(ElmanCell("mine", nonlinearity="tanh"))  # the same name, another cell
    try:
        assert copy.deepcopy(net)._cell.nonlinearity == "relu"
        np.testing.assert_array_equal(clf.predict_proba(X[:4]), proba)
        # A pickle of the network, and so of the estimator (whole or as its model file),
        # is refused rather than run with another cell (it gave the tanh cell the relu
        # weights, and other predictions without a word).
        shown = r"as ElmanCell\(.*nonlinearity='relu'.*\),? .*registers that name as ElmanCell\(.*nonlinearity='tanh'"
        with pytest.raises(ValueError, match=shown):
            pickle.loads(pickle.dumps(net))
        with pytest.raises(ValueError, match=r"cannot save this RNNClassifier to a model file, which names its cell"):
            clf.save(tmp_path / "mine.safetensors")
        assert not (tmp_path / "mine.safetensors").exists()
        with pytest.raises(ValueError, match=shown):
            pickle.loads(pickle.dumps(clf))
    finally:
        unregister_cell("mine")
    # Registered again as it was, the copies and the model file come back as the original.
    register_cell(ElmanCell("mine", nonlinearity="relu"))
    try:
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(clf)).predict_proba(X[:4]), proba)
    finally:
        unregister_cell("mine")


class NormedRecurrence(nn.Module):
    """``h_t = gain * tanh(LayerNorm(u_t + W h_{t-1}))``: values set by its constructor
    (a submodule's initialization, a parameter of ones, a constant buffer) and a draw
    from the global generator (a linear submodule)."""

    def __init__(self, hidden_size: int, *, device: torch.device | str | None = None) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size, device=device))
        self.norm = nn.LayerNorm(hidden_size, device=device)  # weight 1, bias 0
        self.scale = nn.Parameter(torch.ones(hidden_size, device=device))
        self.register_buffer("gain", torch.full((hidden_size,), 0.5, device=device))
        self.mix = nn.Linear(hidden_size, hidden_size, device=device)  # drawn from the global generator

    def forward(self, projected: torch.Tensor) -> torch.Tensor:
        state, states = projected.new_zeros(projected.shape[0], self.hidden_size), []
        for u in projected.unbind(1):
            state = self.gain * torch.tanh(self.norm(u + state @ self.weight_hh.T) * self.scale)
            states.append(self.mix(state))
        return torch.stack(states, dim=1)  # (B, T, H)


class NormedCell(LeakyCell):
    name = "normed"

    def make_recurrence(self, hidden_size, *, n_masked=0, device=None):
        return NormedRecurrence(hidden_size, device=device)


def test_what_a_cells_module_sets_in_its_constructor_survives_the_network(monkeypatch):
    # The recurrence was built on the meta device and allocated uninitialized: its
    # LayerNorm's weights, its parameter of ones and its buffer held whatever memory
    # held (1e28, 3e-41, 0), and the outputs were NaN or 1e25, differently run by run.
    register_cell(NormedCell())
    try:
        global_state = torch.get_rng_state()
        x, lengths = torch.randn(3, 5, 2, generator=torch.Generator().manual_seed(1)), [5, 3, 1]
        nets = [RecurrentNetwork(2, 3, 1, cell="normed", num_layers=2, bidirectional=True,
                                 generator=torch.Generator().manual_seed(0)) for _ in range(2)]
        # The constructor's draw came from the global generator, which is as it was.
        assert torch.equal(torch.get_rng_state(), global_state)
        with torch.device("meta"):  # built on the CPU whatever the default device
            nets.append(RecurrentNetwork(2, 3, 1, cell="normed", num_layers=2, bidirectional=True,
                                         generator=torch.Generator().manual_seed(0)))
        for net in nets:
            for _, _, recurrence in net.stack() + net.reverse_stack():
                assert recurrence.gain.device.type == "cpu"
                torch.testing.assert_close(recurrence.norm.weight, torch.ones(3), rtol=0, atol=0)
                torch.testing.assert_close(recurrence.norm.bias, torch.zeros(3), rtol=0, atol=0)
                torch.testing.assert_close(recurrence.scale, torch.ones(3), rtol=0, atol=0)
                torch.testing.assert_close(recurrence.gain, torch.full((3,), 0.5), rtol=0, atol=0)
                assert bool(recurrence.mix.weight.isfinite().all())
                assert recurrence.mix.weight.abs().max() <= 1 / 3**0.5  # PyTorch's bound
        # Each layer and direction draws its own (the generator was restored after each
        # layer's build, so all four drew the same matrix), as plain PyTorch modules do.
        mixes = [recurrence.mix.weight for _, _, recurrence in nets[0].stack() + nets[0].reverse_stack()]
        assert len(mixes) == 4
        assert not any(torch.equal(a, b) for i, a in enumerate(mixes) for b in mixes[i + 1:])
        outputs = [net(x, lengths) for net in nets]
        assert bool(outputs[0].isfinite().all()) and bool((outputs[0].abs() < 1).all())
        for other in outputs[1:]:
            torch.testing.assert_close(other, outputs[0], rtol=0, atol=0)
    finally:
        unregister_cell("normed")


class LeakyReluRecurrence(LeakyRecurrence):
    """``h_t = (h_{t-1} + relu(u_t + W h_{t-1})) / 2``, stopped at each sequence's end."""

    def forward(self, projected: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        state, states = projected.new_zeros(projected.shape[0], self.hidden_size), []
        for t, u in enumerate(projected.unbind(1)):
            state = 0.5 * state + 0.5 * torch.relu(u + state @ self.weight_hh.T)
            if lengths is not None:
                state = state.masked_fill((t >= lengths.to(state.device))[:, None], 0.0)
            states.append(state)
        return torch.stack(states, dim=1)  # (B, T, H)


class LeakyReluCell(LeakyCell):
    """A cell whose state is not bounded: it takes ``lengths=`` in forward_states alone."""

    name = "leaky_relu"
    bounded_state = False

    def make_recurrence(self, hidden_size, *, n_masked=0, device=None):
        return LeakyReluRecurrence(hidden_size, device=device)

    def forward_states(self, projection, recurrence, z, initial, gaps, *, lengths=None):
        projected = projection(z)  # (B, T, H)
        return LayerStates(z, projected, recurrence(projected, lengths), ())


def test_a_cell_whose_state_is_not_bounded_gets_lengths_through_the_default_forwards():
    # The defaults of forward and the vectorizable forms took no lengths=, which the
    # network passes such a cell: "Cell.forward() got an unexpected keyword argument
    # 'lengths'" in net(x, lengths), fit and predict.
    X, y = sum_task(n=24)
    register_cell(LeakyReluCell())
    try:
        net = RecurrentNetwork(2, 4, 1, cell="leaky_relu", num_layers=2, bidirectional=True,
                               generator=torch.Generator().manual_seed(0))
        x, lengths = torch.randn(3, 5, 2, generator=torch.Generator().manual_seed(1)), torch.tensor([5, 3, 1])
        alone = torch.cat([net(x[i : i + 1, :n], lengths[i : i + 1]) for i, n in enumerate(lengths.tolist())])
        for vectorizable in (False, True):
            net.vectorizable = vectorizable
            torch.testing.assert_close(net(x, lengths), alone)
            with torch.no_grad():
                torch.testing.assert_close(net(x, lengths), alone)
        one_way = RecurrentNetwork(2, 4, 1, cell="leaky_relu", num_layers=2, generator=torch.Generator().manual_seed(0))
        for vectorizable in (False, True):
            one_way.vectorizable = vectorizable
            states = one_way.forward_states(x, lengths)
            torch.testing.assert_close(states.outputs, one_way(x, lengths))
            padded = torch.arange(5) >= lengths[:, None]  # (B, T)
            assert not bool(states.hidden[padded].any())  # stopped: zeros after each end
        with convergence_warning_allowed():
            clf = RNNClassifier(cell="leaky_relu", hidden_size=4, max_iter=2, random_state=0).fit(X, y)
        assert clf.predict_proba(X).shape == (24, 2)
    finally:
        unregister_cell("leaky_relu")


def test_a_learned_initial_state_is_refused_where_the_upper_cell_keeps_other_states():
    # The learned states were shaped by the first layer's cell and handed to every
    # layer: the first forward failed on the upper cell ("initial must be () ... for
    # cell='tanh'; got 2 tensor(s)", "lstm expects two hidden states").
    from sklearn_rnn.nn.cells import LSTMCell

    class LSTMUnderTanh(LSTMCell):
        name, upper = "lstm_then_tanh", "tanh"

    class TanhUnderLSTM(ElmanCell):
        def __init__(self):
            super().__init__("tanh_then_lstm", nonlinearity="tanh")
            self.upper = "lstm"

    class TanhUnderLeaky(ElmanCell):
        def __init__(self):
            super().__init__("tanh_then_leaky", nonlinearity="tanh")
            self.upper = "leaky"

    cells = [LSTMUnderTanh(), TanhUnderLSTM(), TanhUnderLeaky(), LeakyCell()]
    for cell in cells:
        register_cell(cell)
    try:
        x, lengths = torch.randn(3, 5, 2, generator=torch.Generator().manual_seed(1)), [5, 3, 1]
        for name, first, upper in (("lstm_then_tanh", 2, 1), ("tanh_then_lstm", 1, 2)):
            with pytest.raises(ValueError, match=(
                rf"hidden_init='learned' learns .* cell='{name}' keeps \({first}\), but its upper cell "
                rf"'{name.split('_')[-1]}', .* keeps {upper}; use hidden_init='zero', or num_layers=1")):
                RecurrentNetwork(2, 4, 1, cell=name, num_layers=2, hidden_init="learned")
            for build in (dict(num_layers=2), dict(hidden_init="learned", bidirectional=True)):
                net = RecurrentNetwork(2, 4, 1, cell=name, **build)  # one cell's layers, or zero states
                assert net(x, lengths).shape == (3, 1)
        with pytest.raises(ValueError, match="run its upper cell 'leaky', whose state starts at zero"):
            RecurrentNetwork(2, 4, 1, cell="tanh_then_leaky", num_layers=2, hidden_init="learned")
    finally:
        for cell in cells:
            unregister_cell(cell.name)


def test_a_cell_that_breaks_the_contract_is_named_with_the_method_and_what_it_must_return():
    # A plain tuple or a tensor from forward_states failed on "'tuple' object has no
    # attribute 'hidden'", time-major states on an index (or not at all), and an upper
    # cell that is not registered was blamed on the cell name passed.
    def cell(name, forward_states=None, forward=None, upper=None):
        attributes = {"name": name, "upper": upper}
        if forward_states is not None:
            attributes["forward_states"] = forward_states
        if forward is not None:
            attributes["forward"] = forward
        return type("Broken", (LeakyCell,), attributes)()

    def layer(self, projection, recurrence, z, initial, gaps):
        projected = projection(z)
        return LayerStates(z, projected, recurrence(projected), ())

    broken = [
        cell("as_tuple", forward_states=lambda *args: tuple(layer(*args))),
        cell("as_tensor", forward_states=lambda *args: layer(*args).hidden),
        cell("time_major", forward_states=lambda *args: layer(*args)._replace(hidden=layer(*args).hidden.transpose(0, 1))),
        cell("too_wide", forward=lambda *args: layer(*args).hidden.repeat(1, 1, 2)),
        cell("upper_unknown", upper="nonexistent"),
    ]
    for each in broken:
        register_cell(each)
    try:
        x, lengths = torch.randn(3, 5, 2), torch.tensor([5, 3, 1])
        contract = r"Broken.{} must return {} the layer's states, batch-first, \(batch, steps, hidden_size\) = \(3, 5, {}\); got {}"
        states = "a LayerStates whose hidden is"
        for name, method, what, got, error in (
            ("as_tuple", "forward_states", states, "tuple", TypeError),
            ("as_tensor", "forward_states", states, "Tensor", TypeError),
            ("time_major", "forward_states", states, r"states of shape \(5, 3, 4\)", ValueError),
            ("too_wide", "forward", "a tensor of", r"states of shape \(3, 5, 8\)", ValueError),
        ):
            net = RecurrentNetwork(2, 4, 1, cell=name, generator=torch.Generator().manual_seed(0))
            runs = [net.forward_states] if method == "forward_states" else []
            for run in (*runs, net):  # the default forward runs forward_states
                size = "4" if run is not net or method == "forward" else "hidden_size"
                with pytest.raises(error, match=f"cell='{name}': " + contract.format(method, what, size, got)):
                    run(x, lengths)
        with pytest.raises(ValueError, match=(
            r"cell 'upper_unknown' has upper='nonexistent', which is not registered: register that cell "
            r"first, or set upper to one of \[.*'tanh'.*\], or to None")):
            RecurrentNetwork(2, 4, 1, cell="upper_unknown", num_layers=2)
    finally:
        for each in broken:
            unregister_cell(each.name)


def test_a_cells_switches_and_its_module_are_no_part_of_what_a_pickle_checks():
    # A pickle recorded every plain attribute of the cell: one made with the documented
    # get_cell('gru').trains_stepwise = False was refused where it was not set ("its
    # weights would run another recurrence"), for the package's own cells too; and the
    # class's module, so a cell of a script (__main__) was refused in a spawned worker,
    # where it is __mp_main__ (core43 review).
    import pickle

    from sklearn_rnn.nn.cells._base import _cell_identity

    net = RecurrentNetwork(2, 3, 1, cell="gru", generator=torch.Generator().manual_seed(0))
    blob = pickle.dumps(net)
    get_cell("gru").trains_stepwise = False
    try:
        again = pickle.loads(blob)
        stepwise = pickle.loads(pickle.dumps(net))
    finally:
        del get_cell("gru").trains_stepwise
    assert again._cell is stepwise._cell is get_cell("gru")
    mine = ElmanCell("mine", nonlinearity="relu")
    mine.stackable = True  # a switch set on a user's cell
    assert _cell_identity(mine) == _cell_identity(ElmanCell("mine", nonlinearity="relu"))
    assert _cell_identity(mine)["class"] == "ElmanCell"  # its module is not recorded


def test_a_cell_that_ignores_its_learned_initial_state_is_refused_by_name():
    # A cell written as the how-to says, leaving learned_initial at its default, whose
    # forward_states never reads `initial`: hidden_init='learned' trained a state with
    # no effect on the outputs and no gradient, without a word (core43 review).
    class Ignoring(ElmanCell):
        def forward_states(self, projection, recurrence, z, initial, gaps, *, lengths=None):
            return super().forward_states(projection, recurrence, z, (), gaps)

        def forward(self, projection, recurrence, z, initial, gaps, *, lengths=None):
            return Cell.forward(self, projection, recurrence, z, initial, gaps)

    register_cell(Ignoring("ignoring", nonlinearity="tanh"))
    try:
        net = RecurrentNetwork(2, 3, 1, cell="ignoring", hidden_init="learned",
                               generator=torch.Generator().manual_seed(0))
        x = torch.randn(2, 4, 2)
        for run in (net, net.forward_states):
            with pytest.raises(ValueError, match=r"cell 'ignoring' was given learned initial states .* or set "
                                                 r"learned_initial = False"):
                run(x, [4, 3])
    finally:
        unregister_cell("ignoring")


def test_a_cell_with_a_nan_setting_is_its_own_identity():
    # NaN never equals itself: such a cell's own network was refused as another cell on
    # unpickling, and its model file on loading (diff43 review).
    import pickle

    class Filled(ElmanCell):
        def __init__(self):
            super().__init__("filled", nonlinearity="tanh")
            self.fill_value = float("nan")

    register_cell(Filled())
    try:
        net = RecurrentNetwork(2, 3, 1, cell="filled", generator=torch.Generator().manual_seed(0))
        assert pickle.loads(pickle.dumps(net))._cell is get_cell("filled")
    finally:
        unregister_cell("filled")


class FloatDoubledCell(LeakyCell):
    """A contract slip: states in float64 for float32 inputs."""

    name = "doubled"

    def forward_states(self, projection, recurrence, z, initial, gaps):
        states = super().forward_states(projection, recurrence, z, initial, gaps)
        return states._replace(hidden=states.hidden.double())


def test_a_cell_returning_states_of_another_dtype_is_told_the_contract():
    # The readout met "mat1 and mat2 must have the same dtype", naming no cell.
    register_cell(FloatDoubledCell())
    try:
        net = RecurrentNetwork(3, 4, 2, cell="doubled", generator=torch.Generator().manual_seed(0))
        with pytest.raises(ValueError, match=r"cell='doubled': FloatDoubledCell.forward_states must return the "
                                             r"layer's states in its inputs' dtype, torch.float32 .* got torch.float64"):
            net(torch.randn(2, 3, 3), [3, 1])
    finally:
        unregister_cell("doubled")
