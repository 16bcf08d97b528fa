"""bidirectional=True: both directions of time, as PyTorch's bidirectional networks compute them."""

import json
import warnings

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from torch import nn

from _helpers import quiet_fit

from sklearn_rnn import RNNClassifier, RNNGridSearchCV, RNNRegressor, RNNStepClassifier
from sklearn_rnn._stacked import StackedMember, train_stacked
from sklearn_rnn.nn import RecurrentNetwork
from sklearn_rnn.nn._network import reverse_steps

TINY = dict(hidden_size=6, max_iter=4, batch_size=8, random_state=0)
TORCH_MODULES = {"tanh": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


def ragged(n=40, seed=0, d=2, low=3, high=12):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(int(rng.integers(low, high)), d)) for _ in range(n)]




def torch_twin(net, cell):
    """A torch.nn bidirectional module with the network's weights (the projection's
    weights and bias as the module's input weights and bias)."""
    twin = TORCH_MODULES[cell](net.input_size, net.hidden_size, num_layers=net.num_layers,
                               bidirectional=True, batch_first=True)
    with torch.no_grad():
        for layer, directions in enumerate(zip(net.stack(), net.reverse_stack())):
            for suffix, (_, projection, recurrence) in zip(("", "_reverse"), directions):
                getattr(twin, f"weight_ih_l{layer}{suffix}").copy_(projection.weight)
                getattr(twin, f"bias_ih_l{layer}{suffix}").copy_(projection.bias)
                getattr(twin, f"weight_hh_l{layer}{suffix}").copy_(recurrence.weight_hh_l0)
                recurrent_bias = recurrence.bias_hh_l0 if cell == "gru" else torch.zeros_like(projection.bias)
                getattr(twin, f"bias_hh_l{layer}{suffix}").copy_(recurrent_bias)
    return twin


def test_reverse_steps_reverses_each_sequence_within_its_length():
    x = torch.arange(12.0).reshape(2, 6, 1)
    lengths = torch.tensor([6, 4])
    flipped = reverse_steps(x, lengths)
    assert flipped[0, :, 0].tolist() == [5, 4, 3, 2, 1, 0]
    assert flipped[1, :, 0].tolist() == [9, 8, 7, 6, 10, 11]  # padding stays put
    torch.testing.assert_close(reverse_steps(flipped, lengths), x)


@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("cell", ["tanh", "gru", "lstm"])
def test_every_step_matches_torch_bidirectional_module_on_packed_sequences(cell, num_layers):
    hidden = 4
    net = RecurrentNetwork(3, hidden, 2 * hidden, cell=cell, num_layers=num_layers, bidirectional=True,
                           spectral_radius=None, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():  # the readout reads the states themselves
        net.readout.weight.copy_(torch.eye(2 * hidden))
        net.readout.bias.zero_()
    twin = torch_twin(net, cell)
    x, lengths = torch.randn(4, 6, 3), torch.tensor([6, 3, 2, 1])
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    expected, _ = nn.utils.rnn.pad_packed_sequence(twin(packed)[0], batch_first=True, total_length=6)
    valid = (torch.arange(6)[None] < lengths[:, None])[..., None]
    with torch.no_grad():  # prediction: the fused kernels
        fused = net.eval()(x, lengths, every_step=True)
    stepwise = net.train()(x, lengths, every_step=True).detach()  # training on a CPU: the step loop
    net.vectorizable = True  # the stacked trainer's loop in plain tensor operations
    looped = net(x, lengths, every_step=True).detach()
    for states in (fused, stepwise, looped):
        torch.testing.assert_close(states * valid, expected * valid, atol=1e-6, rtol=1e-5)


def test_the_readout_reads_the_forward_end_and_the_backward_start():
    hidden = 3
    net = RecurrentNetwork(2, hidden, 2 * hidden, cell="gru", bidirectional=True,
                           generator=torch.Generator().manual_seed(1)).eval()
    with torch.no_grad():
        net.readout.weight.copy_(torch.eye(2 * hidden))
        net.readout.bias.zero_()
    twin = torch_twin(net, "gru")
    x, lengths = torch.randn(3, 5, 2), torch.tensor([5, 2, 4])
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    final = twin(packed)[1]  # (2, B, H): each direction's state after its whole pass
    with torch.no_grad():
        torch.testing.assert_close(net(x, lengths), torch.cat([final[0], final[1]], dim=1))
    # Each sequence alone gives what it gives in the padded batch.
    with torch.no_grad():
        alone = torch.cat([net(x[i:i + 1, :n], lengths[i:i + 1]) for i, n in enumerate(lengths.tolist())])
        torch.testing.assert_close(net(x, lengths), alone)


def test_a_pooled_bidirectional_readout_reads_six_times_hidden_size():
    net = RecurrentNetwork(2, 5, 3, cell="gru", readout="pool", bidirectional=True, conv_kernels=(3,),
                           conv_channels=4, generator=torch.Generator().manual_seed(0))
    assert net.readout.in_features == 30
    assert net(torch.randn(2, 7, 2), torch.tensor([7, 4])).shape == (2, 3)


def test_one_direction_draws_and_names_what_it_drew_before():
    # A network of one direction holds the same parameters, drawn in the same order, as
    # before the option existed: the backward direction draws after everything else.
    one = RecurrentNetwork(2, 4, 3, cell="gru", num_layers=2, generator=torch.Generator().manual_seed(0))
    both = RecurrentNetwork(2, 4, 3, cell="gru", num_layers=2, bidirectional=True,
                            generator=torch.Generator().manual_seed(0))
    assert not any(name.startswith("reverse_layers") for name, _ in one.named_parameters())
    torch.testing.assert_close(one.input_projection.weight, both.input_projection.weight)
    torch.testing.assert_close(one.recurrent_weight, both.recurrent_weight)
    assert both.upper_layers[0].input_projection.in_features == 8  # both directions below


def test_learned_initial_states_have_a_row_per_layer_and_direction():
    net = RecurrentNetwork(2, 4, 1, cell="lstm", num_layers=2, hidden_init="learned", bidirectional=True,
                           generator=torch.Generator().manual_seed(0))
    assert net.initial_hidden.shape == (4, 4) and net.initial_cell.shape == (4, 4)
    out = net(torch.randn(3, 5, 2), torch.tensor([5, 3, 1]))
    out.sum().backward()
    assert net.initial_hidden.grad[2:].abs().sum() > 0  # the backward directions' rows learn


def test_temporal_gradients_and_time_aware_cells_are_refused_by_the_network():
    net = RecurrentNetwork(2, 4, 1, cell="gru", bidirectional=True)
    with pytest.raises(ValueError, match="one direction of time.*bidirectional=False"):
        net.forward_states(torch.randn(1, 3, 2), torch.tensor([3]))
    with pytest.raises(ValueError, match="bidirectional=True needs a cell"):
        RecurrentNetwork(2, 4, 1, cell="decay", gap_channel=1, bidirectional=True)


def test_the_classifier_learns_what_only_the_first_step_says():
    # The label sits in the first step; the backward direction reads it last.
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(20, 40)), 2)) for _ in range(240)]
    y = np.array([int(x[0, 0] > 0) for x in X])
    clf = quiet_fit(RNNClassifier(bidirectional=True, readout="last", hidden_size=8, max_iter=15,
                                  random_state=0), X[:160], y[:160])
    assert clf.module_.bidirectional and clf.module_.readout.in_features == 16
    assert clf.score(X[160:], y[160:]) > 0.9


@pytest.mark.parametrize("params, message", [
    (dict(optimizer="simplex", cell="tanh", conv_kernels=None), "simplex"),
    (dict(cell="decay", time_feature=0), "time since the previous step"),
])
def test_the_estimators_refuse_what_one_direction_needs(params, message):
    X = [np.c_[np.cumsum(np.ones(len(x))), x] for x in ragged()]
    y = np.array([int(x[0, 1] > 0) for x in X])
    with pytest.raises(ValueError, match=f"bidirectional=True cannot be used with .*{message}"):
        RNNClassifier(bidirectional=True, **params, **TINY).fit(X, y)


def test_the_step_classifier_refuses_it():
    X = ragged()
    y = [(x > 0).astype(float) for x in X]
    with pytest.raises(ValueError, match="predicts at every step"):
        RNNStepClassifier(bidirectional=True, **TINY).fit(X, y)


def test_continued_training_refuses_a_changed_direction_and_keeps_the_model():
    X = ragged()
    y = np.array([x[:, 0].sum() for x in X])
    reg = quiet_fit(RNNRegressor(bidirectional=True, **TINY), X, y)
    before = reg.predict(X)
    reg.set_params(warm_start=True, bidirectional=False)
    with pytest.raises(ValueError, match="fitted with bidirectional=True"):
        reg.fit(X, y)
    np.testing.assert_array_equal(reg.predict(X), before)


def test_model_files_keep_the_direction_and_refuse_a_forged_one(tmp_path):
    X = ragged()
    y = np.array([int(x[0, 0] > 0) for x in X])
    clf = quiet_fit(RNNClassifier(bidirectional=True, num_layers=2, **TINY), X, y)
    path = tmp_path / "both.safetensors"
    clf.save(path)
    loaded = RNNClassifier.load(path)
    assert loaded.bidirectional and loaded.module_.bidirectional
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    from sklearn_rnn._persistence import _digest

    # A header that says one direction over weights of two is refused, before anything is built.
    header["params"]["bidirectional"] = False
    forged = tmp_path / "forged.safetensors"
    header["sha256"] = _digest(header, tensors)
    save_file(tensors, str(forged), metadata={"sklearn_rnn": json.dumps(header)})
    with pytest.raises(ValueError, match="bidirectional=False"):
        RNNClassifier.load(forged)
    # A file of one direction written before the option loads as one direction.
    one = quiet_fit(RNNClassifier(**TINY), X, y)
    one.save(path)
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    del header["params"]["bidirectional"]
    header["sha256"] = _digest(header, tensors)
    save_file(tensors, str(forged), metadata={"sklearn_rnn": json.dumps(header)})
    older = RNNClassifier.load(forged)
    assert older.bidirectional is False
    np.testing.assert_array_equal(older.predict_proba(X), one.predict_proba(X))


@pytest.mark.parametrize("readout", ["last", "pool"])
def test_stacked_bidirectional_networks_match_their_own_fit(readout, monkeypatch):
    X = ragged(60, seed=2)
    y = np.array([int(x[0, 0] + x[-1, 1] > 0) for x in X])
    # On the CPU, where a fit repeats to the digit: on a GPU cuDNN's bidirectional backward
    # does not (two runs of this test on an H100 ended 1.5e-6 and 4e-4 apart); stacking on
    # CUDA is checked by test_stacked_search.py.
    models = [RNNClassifier(cell="gru", bidirectional=True, readout=readout, conv_kernels=None, optimizer="sgd",
                            learning_rate=0.05, spectral_radius=radius, hidden_size=5, batch_size=16, max_iter=6,
                            early_stopping=False, random_state=seed, device="cpu")
              for radius, seed in ((0.9, 0), (1.3, 1))]
    stacked, alone = [clone(m) for m in models], [clone(m) for m in models]
    members = [StackedMember(model, *model._prepare(X, y, None, incremental=False)) for model in stacked]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        train_stacked(members)
        for model in alone:
            model.fit(X, y)
    for a, b in zip(stacked, alone):
        assert a.module_.bidirectional and a.n_iter_ == b.n_iter_
        for p, q in zip(a.module_.parameters(), b.module_.parameters()):
            torch.testing.assert_close(p, q, atol=1e-6, rtol=0)
        np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-5)


def test_rnn_grid_search_searches_the_direction():
    X = ragged(48, seed=3)
    y = np.array([int(x[0, 0] > 0) for x in X])
    search = RNNGridSearchCV(RNNClassifier(hidden_size=4, max_iter=3, random_state=0),
                             {"bidirectional": [False, True]}, cv=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X, y)
    assert list(search.cv_results_["param_bidirectional"]) == [False, True]
    assert search.best_estimator_.module_.bidirectional == search.best_params_["bidirectional"]


# ------------------------------------------------ what a review of the option found
def test_the_refusals_name_the_fix_the_user_can_take():
    X = ragged()
    Y = [(x > 0).astype(float) for x in X]
    # The per-step class first: no other setting lifts it.
    with pytest.raises(ValueError, match="predicts at every step.*use bidirectional=False, or RNNClassifier"):
        RNNStepClassifier(bidirectional=True, optimizer="simplex", cell="tanh", **TINY).fit(X, Y)
    timed = [np.c_[np.cumsum(np.ones(len(x))), x] for x in X]
    y = np.array([int(x[0, 1] > 0) for x in timed])
    # 'auto' chose the time-aware cell: the message says so and names a cell that works.
    with pytest.raises(ValueError, match=r"cell='auto' \(here 'decay'\).*pass cell='gru'"):
        RNNClassifier(bidirectional=True, time_feature=0, **TINY).fit(timed, y)
    assert quiet_fit(RNNClassifier(bidirectional=True, time_feature=0, cell="gru", **TINY), timed, y).module_.bidirectional
    with pytest.raises(ValueError, match="bidirectional must be True or False; got 'False'"):
        RecurrentNetwork(2, 3, 1, bidirectional="False")


def test_temporal_gradient_norms_refuses_a_bidirectional_estimator_in_its_terms():
    from sklearn_rnn.diagnostics import temporal_gradient_norms

    X = ragged()
    y = np.array([int(x[0, 0] > 0) for x in X])
    for model in (RNNClassifier(bidirectional=True, readout="last", conv_kernels=None, **TINY),
                  quiet_fit(RNNClassifier(bidirectional=True, readout="last", conv_kernels=None, **TINY), X, y)):
        with pytest.raises(ValueError, match=r"this RNNClassifier( \(its fitted network\))? has "
                                             r"bidirectional=True\. Measure it with bidirectional=False"):
            temporal_gradient_norms(model, X, y)


def test_a_model_file_whose_parameters_no_fit_accepts_names_the_file(tmp_path):
    X = ragged()
    y = np.array([int(x[0, 0] > 0) for x in X])
    clf = quiet_fit(RNNClassifier(bidirectional=True, cell="tanh", readout="last", conv_kernels=None, **TINY), X, y)
    path = tmp_path / "model.safetensors"
    clf.save(path)
    with safe_open(str(path), framework="pt") as handle:
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        header = json.loads(handle.metadata()["sklearn_rnn"])
    from sklearn_rnn._persistence import _digest

    header["params"]["optimizer"] = "simplex"
    header["sha256"] = _digest(header, tensors)
    save_file(tensors, str(path), metadata={"sklearn_rnn": json.dumps(header)})
    with pytest.raises(ValueError, match="model.safetensors.*cannot build a network: bidirectional=True "
                                         "cannot be used with optimizer='simplex'"):
        RNNClassifier.load(path)


def test_pickles_from_before_the_option_load_as_one_direction():
    import pickle

    X = ragged()
    y = np.array([int(x[0, 0] > 0) for x in X])
    unfitted = RNNClassifier(**TINY)
    state = unfitted.__getstate__()
    del state["bidirectional"]  # as an estimator pickled before the option
    old = RNNClassifier.__new__(RNNClassifier)
    old.__setstate__(state)
    assert old.get_params()["bidirectional"] is False
    net = RecurrentNetwork(2, 3, 1, cell="gru", generator=torch.Generator().manual_seed(0))
    x, lengths = torch.randn(2, 4, 2), torch.tensor([4, 2])
    expected = net(x, lengths)
    del net.reverse_layers, net.bidirectional  # as a network pickled before the option
    restored = pickle.loads(pickle.dumps(net))
    assert restored.bidirectional is False and len(restored.reverse_layers) == 0
    torch.testing.assert_close(restored(x, lengths), expected)
    fitted = quiet_fit(RNNClassifier(bidirectional=True, **TINY), X, y)
    assert pickle.loads(pickle.dumps(fitted)).module_.bidirectional  # the option itself survives


@pytest.mark.parametrize("conv_kernels", [(), (3, 5)])  # the stage zeroes padding itself
@pytest.mark.parametrize("bidirectional", [False, True])
def test_the_pooled_readout_ignores_non_finite_padding(bidirectional, conv_kernels):
    net = RecurrentNetwork(2, 4, 3, cell="gru", readout="pool", bidirectional=bidirectional,
                           conv_kernels=conv_kernels, conv_channels=3,
                           generator=torch.Generator().manual_seed(0)).eval()
    x, lengths = torch.randn(2, 6, 2), torch.tensor([6, 3])
    with torch.no_grad():
        clean = net(x, lengths)
        x[1, 3:] = float("nan")
        torch.testing.assert_close(net(x, lengths), clean)
