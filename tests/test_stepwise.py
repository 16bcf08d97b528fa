"""The CPU's step-by-step recurrence (nn/cells/) against PyTorch's fused cells."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
import torch

from sklearn_rnn.nn import RecurrentNetwork
from sklearn_rnn.nn.cells import _stepwise, stepwise_recurrence

GATES = {"tanh": 1, "relu": 1, "gru": 3, "lstm": 4}
HIDDEN = 4


def inputs(cell, steps, *, seed=0, learned=True):
    """u, W_hh, b_hh and initial states in float64, all requiring gradients."""
    gen = torch.Generator().manual_seed(seed)
    width = GATES[cell] * HIDDEN
    draw = lambda *shape, scale=1.0: (scale * torch.randn(*shape, generator=gen, dtype=torch.float64)).requires_grad_()
    u = draw(3, steps, width)
    weight = draw(width, HIDDEN, scale=0.6)
    bias = draw(width, scale=0.3) if cell == "gru" else None
    initial = ()
    if learned:
        initial = (draw(3, HIDDEN),) + ((draw(3, HIDDEN),) if cell == "lstm" else ())
    return u, weight, bias, initial


def reference(cell, u, weight, bias, initial):
    """PyTorch's own module, input weights the identity: the same function of u."""
    width = GATES[cell] * HIDDEN
    kwargs = {"nonlinearity": cell} if cell in ("tanh", "relu") else {}
    module = {"tanh": torch.nn.RNN, "relu": torch.nn.RNN, "gru": torch.nn.GRU, "lstm": torch.nn.LSTM}[cell]
    net = module(width, HIDDEN, batch_first=True, **kwargs).double()
    with torch.no_grad():
        net.weight_ih_l0.copy_(torch.eye(width))
        net.bias_ih_l0.zero_()
        net.bias_hh_l0.zero_()
    del net.weight_hh_l0
    net.weight_hh_l0 = weight  # the same leaves: gradients reach them
    if bias is not None:
        del net.bias_hh_l0
        net.bias_hh_l0 = bias
    states = [s[None] for s in initial] or [u.new_zeros(1, 3, HIDDEN)] * (2 if cell == "lstm" else 1)
    hx = tuple(states) if cell == "lstm" else states[0]
    return net(u, hx)[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_the_tensor_constants_give_the_arithmetic_of_python_numbers(dtype):
    """tanh_ and the loops take 1 and 2 as 0-dimensional tensors (cheaper per step than
    Python numbers); the values must stay those of the Python numbers, bit for bit, in
    the tensor's own dtype."""
    x = torch.randn(64, 50, generator=torch.Generator().manual_seed(0)).mul_(4).to(dtype)
    scalars = torch.mul(x, 2).sigmoid_().mul_(2).sub_(1)
    out = torch.empty_like(x)
    assert torch.equal(_stepwise.tanh_(x.clone()), scalars)
    assert torch.equal(_stepwise.tanh_(x, out=out), scalars) and out.dtype == dtype
    assert torch.equal(x.clone().mul_(_stepwise.TWO).sub_(_stepwise.ONE), x.clone().mul_(2).sub_(1))


def test_the_constants_do_not_follow_a_default_device_set_before_import():
    """A default device set before the package is imported (a 'meta' one silently gave
    wrong values) does not reach the constants."""
    code = (
        "import torch; torch.set_default_device('meta')\n"
        "from sklearn_rnn.nn.cells import _stepwise\n"
        "x = torch.linspace(-3, 3, 7, device='cpu')\n"
        "assert _stepwise.TWO.device.type == 'cpu', _stepwise.TWO.device\n"
        "assert torch.allclose(_stepwise.tanh_(x.clone()), torch.tanh(x), atol=1e-6)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("cell", list(GATES))
@pytest.mark.parametrize("steps", [5, 2 * _stepwise.CHUNK + 3])
def test_matches_pytorchs_cells_and_their_gradients(cell, steps):
    u, weight, bias, initial = inputs(cell, steps)
    _, hidden, _ = stepwise_recurrence(cell, u, weight, bias, initial)
    expected = reference(cell, u, weight, bias, initial)
    torch.testing.assert_close(hidden, expected, rtol=0, atol=1e-12)
    upstream = torch.randn(hidden.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    leaves = [u, weight, *initial] + ([bias] if bias is not None else [])
    got = torch.autograd.grad(hidden, leaves, upstream)
    want = torch.autograd.grad(expected, leaves, upstream)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


@pytest.mark.parametrize("cell", list(GATES))
def test_gradcheck_across_chunks(cell):
    """Finite differences, over more steps than one chunk of derivative factors."""
    u, weight, bias, initial = inputs(cell, _stepwise.CHUNK + 2, learned=True)
    extra = (bias,) if bias is not None else ()

    def run(u, weight, *rest):
        b = rest[-1] if bias is not None else None
        states = rest[: len(initial)]
        return stepwise_recurrence(cell, u, weight, b, states)[1]

    assert torch.autograd.gradcheck(run, (u, weight, *initial, *extra))


@pytest.mark.parametrize("cell", list(GATES))
def test_the_gradient_of_u_is_every_gate_delta(cell):
    """dL/du equals the gradient of u where the reference reads it, for a last-step loss."""
    u, weight, bias, initial = inputs(cell, 7, learned=False)
    fed, hidden, _ = stepwise_recurrence(cell, u, weight, bias, initial)
    (delta,) = torch.autograd.grad(hidden[:, -1].square().sum(), fed)
    (expected,) = torch.autograd.grad(reference(cell, u, weight, bias, initial)[:, -1].square().sum(), u)
    torch.testing.assert_close(delta, expected, rtol=0, atol=1e-12)


def test_asking_for_the_deltas_skips_the_recurrent_weight_gradient(monkeypatch):
    calls = []
    backward = _stepwise.RecurrentWeights.backward

    def counted(ctx, grad):
        calls.append(1)
        return backward(ctx, grad)

    monkeypatch.setattr(_stepwise.RecurrentWeights, "backward", staticmethod(counted))
    u, weight, bias, initial = inputs("gru", 6)
    fed, hidden, _ = stepwise_recurrence("gru", u, weight, bias, initial)
    torch.autograd.grad(hidden.sum(), [fed, *initial], retain_graph=True)
    assert calls == []
    hidden.sum().backward()
    assert calls == [1] and weight.grad is not None and bias.grad is not None


def test_network_uses_it_on_the_cpu_and_runs_in_the_parameters_dtype_under_autocast():
    net = RecurrentNetwork(3, 5, 1, cell="lstm", generator=torch.Generator().manual_seed(0))
    x, lengths = torch.randn(2, 4, 3), torch.tensor([4, 2])
    states = net.forward_states(x, lengths)
    assert type(states.projected.grad_fn).__name__ == "RecurrentWeightsBackward"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = net.forward_states(x, lengths)
    assert low.projected.dtype == low.hidden.dtype == torch.float32
    torch.testing.assert_close(low.hidden, states.hidden, rtol=0, atol=0.05)


def test_errors_say_what_is_wrong():
    u, weight, bias, _ = inputs("gru", 3)
    with pytest.raises(ValueError, match="cell must be one of"):
        stepwise_recurrence("decay", u, weight, bias, ())
    with pytest.raises(ValueError, match=r"shape \(batch, steps, 12\)"):
        stepwise_recurrence("gru", u[..., :4], weight, bias, ())
    with pytest.raises(ValueError, match="required for cell='gru'"):
        stepwise_recurrence("gru", u, weight, None, ())
    with pytest.raises(ValueError, match="None for the others"):
        stepwise_recurrence("tanh", u[..., :4], weight[:4], bias[:4], ())


def _counting_kernel(monkeypatch, cell):
    """Count the calls of ``cell``'s fused kernel (still computing)."""
    from sklearn_rnn.nn import get_cell

    calls = []
    fused = get_cell(cell).kernel

    def kernel(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(get_cell(cell), "kernel", kernel)
    return calls


def test_which_cells_train_step_by_step_on_the_cpu():
    """The measured choice (``benchmarks/bench_recurrence.py``): the Elman cells and the
    GRU train with their loops, the LSTM with its kernel (its loop is 1.5-2.8x slower)."""
    from sklearn_rnn.nn import get_cell

    assert all(get_cell(name).trains_stepwise for name in ("tanh", "relu", "gru"))
    assert not get_cell("lstm").trains_stepwise


@pytest.mark.parametrize("cell", ["gru", "tanh"])
def test_a_cell_trains_on_the_cpu_with_the_stepwise_recurrence_and_predicts_with_the_fused_kernel(
    monkeypatch, cell
):
    """Training passes (gradients on, no autocast) of a cell that trains_stepwise skip
    the fused kernel and give its outputs and gradients; prediction and bfloat16
    autocast keep the kernel; a cell that does not (the LSTM) always uses it."""
    from sklearn_rnn.nn import get_cell

    calls = _counting_kernel(monkeypatch, cell)
    net = RecurrentNetwork(3, 5, 2, cell=cell, num_layers=2, hidden_init="learned",
                           generator=torch.Generator().manual_seed(0))
    x, lengths = torch.randn(4, 7, 3, generator=torch.Generator().manual_seed(1)), torch.tensor([7, 3, 1, 5])

    def loss_and_gradients():
        net.zero_grad()
        loss = net(x, lengths).square().sum()
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in net.parameters() if p.requires_grad]

    stepwise_loss, stepwise_grads = loss_and_gradients()
    assert calls == []
    monkeypatch.setattr(get_cell(cell), "trains_stepwise", False)
    fused_loss, fused_grads = loss_and_gradients()
    assert calls == [1, 1]  # two layers
    torch.testing.assert_close(stepwise_loss, fused_loss, rtol=1e-5, atol=1e-6)
    for stepwise, fused in zip(stepwise_grads, fused_grads, strict=True):
        torch.testing.assert_close(stepwise, fused, rtol=1e-4, atol=1e-6)
    monkeypatch.setattr(get_cell(cell), "trains_stepwise", True)
    calls.clear()
    with torch.no_grad():
        net(x, lengths)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        net(x, lengths)
    assert calls == [1, 1, 1, 1]
    lstm_calls = _counting_kernel(monkeypatch, "lstm")
    lstm = RecurrentNetwork(3, 5, 2, cell="lstm", generator=torch.Generator().manual_seed(0))
    lstm(x, lengths).sum().backward()
    assert lstm_calls == [1]


@pytest.mark.parametrize("cell", ["gru", "tanh"])
def test_second_derivatives_need_the_fused_kernel_which_the_cell_attribute_gives(monkeypatch, cell):
    """The hand-written backward pass is differentiable once: recording its gradient
    (create_graph=True, as second derivatives need) fails with an error that names the
    cell and the fix, and with trains_stepwise off (as the error and the attribute's
    documentation say) the fused kernel gives it. The error came only when a second
    derivative reached a node hung on the gradients: a Hessian of a frozen network was 0
    and a gradient penalty under a frozen readout missed W_rec, without a word."""
    from sklearn_rnn.nn import get_cell

    net = RecurrentNetwork(3, 4, 1, cell=cell, generator=torch.Generator().manual_seed(0))
    x, lengths = torch.randn(2, 5, 3, requires_grad=True), torch.tensor([5, 3])

    def input_gradient_norm():
        (grad,) = torch.autograd.grad(net(x, lengths).sum(), x, create_graph=True)
        return grad.square().sum()

    fix = rf"record the gradient.*differentiable once.*create_graph=True.*get_cell\('{cell}'\)\.trains_stepwise = False"
    with pytest.raises(RuntimeError, match=fix):
        input_gradient_norm().backward()
    frozen = copy.deepcopy(net).requires_grad_(False)
    with pytest.raises(RuntimeError, match=fix):  # was a Hessian of zeros
        torch.autograd.functional.hessian(lambda v: frozen(v, lengths).sum(), x.detach())
    net.readout.requires_grad_(False)
    with pytest.raises(RuntimeError, match=fix):  # was a penalty that missed W_rec
        input_gradient_norm().backward()
    net.readout.requires_grad_(True)
    net.zero_grad()
    monkeypatch.setattr(get_cell(cell), "trains_stepwise", False)
    input_gradient_norm().backward()
    hessian = torch.autograd.functional.hessian(lambda v: frozen(v, lengths).sum(), x.detach())
    assert bool(hessian.abs().sum() > 0)
    [(_, projection, recurrence)] = list(net.stack())
    for weight in (projection.weight, recurrence.weight_hh_l0):  # both shape dL/dx
        assert weight.grad is not None and bool(torch.isfinite(weight.grad).all())
        assert bool(weight.grad.abs().sum() > 0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("cell", ["tanh", "relu", "gru", "lstm"])
def test_torch_func_transforms_differentiate_the_modules_forward(cell, dtype):
    # torch.func.jacrev failed on the step-by-step recurrence's autograd.Function ("must
    # override the setup_context staticmethod"), the default cells' training path; and
    # jacfwd on the float32 LSTM, whose oneDNN kernel has no forward-mode derivative.
    from torch.func import jacfwd, jacrev

    net = RecurrentNetwork(2, 3, 1, cell=cell, generator=torch.Generator().manual_seed(1)).to(dtype)
    x = torch.randn(3, 5, 2, dtype=dtype, generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor([5, 1, 3])
    expected = torch.autograd.functional.jacobian(lambda v: net(v, lengths), x)
    for transform in (jacrev, jacfwd):
        torch.testing.assert_close(transform(lambda v: net(v, lengths))(x), expected)


def test_a_vectorized_jacobian_through_the_step_loop_names_the_fix():
    # torch.autograd.functional.jacobian(vectorize=True) batches the backward pass with
    # PyTorch's older vmap, which failed inside the hand-written pass ("Batching rule not
    # implemented for aten::cat.out").
    net = RecurrentNetwork(2, 3, 1, cell="gru", generator=torch.Generator().manual_seed(0))
    x, lengths = torch.randn(2, 4, 2), torch.tensor([4, 2])
    with pytest.raises(RuntimeError, match=r"batch \(vmap\) the backward pass.*trains_stepwise = False"):
        torch.autograd.functional.jacobian(lambda v: net(v, lengths), x, vectorize=True)
    (gradient,) = torch.autograd.grad(net(x.requires_grad_(), lengths).sum(), x)  # a plain one still runs
    assert gradient.shape == x.shape


def test_second_derivatives_through_forward_states_point_to_the_module_s_forward(monkeypatch):
    """forward_states runs the step-by-step recurrence on a CPU whatever trains_stepwise
    says (temporal gradients need it): the error sent its users to that attribute, which
    changed nothing, and torch.func over it failed inside PyTorch ("must override the
    setup_context staticmethod"). The error now names the module's own forward pass, which
    gives the second derivative and the Jacobian."""
    from torch.func import jacrev

    from sklearn_rnn.nn import get_cell
    from sklearn_rnn.optim import RecurrentAdapter

    net = RecurrentNetwork(2, 3, 1, cell="gru", generator=torch.Generator().manual_seed(0)).double()
    module = torch.nn.GRU(2, 3, batch_first=True).double()
    adapter = RecurrentAdapter(module, torch.nn.Linear(3, 1).double())
    x, lengths = torch.randn(2, 4, 2, dtype=torch.float64, requires_grad=True), torch.tensor([4, 2])
    monkeypatch.setattr(get_cell("gru"), "trains_stepwise", False)
    way_out = r"differentiable once.*module's own forward pass \(net\(x, lengths\)\), not forward_states"
    for states in (net.forward_states(x, lengths), adapter.forward_states(x, lengths)):
        with pytest.raises(RuntimeError, match="record the gradient of.*" + way_out):
            torch.autograd.grad(states.hidden.square().sum(), x, create_graph=True)
    for forward_states in (net.forward_states, adapter.forward_states):
        with pytest.raises(RuntimeError, match="apply a torch.func transform to.*" + way_out):
            jacrev(lambda v: forward_states(v, lengths).hidden)(x.detach())
    # the LSTM trains on its fused kernel already: no attribute to set for it
    lstm = RecurrentAdapter(torch.nn.LSTM(2, 3, batch_first=True).double(), torch.nn.Linear(3, 1).double())
    with pytest.raises(RuntimeError, match=r"cell 'lstm'.*not forward_states: under a torch.func transform .* plain tensor operations on a CPU") as error:
        torch.autograd.grad(lstm.forward_states(x, lengths).hidden.square().sum(), x, create_graph=True)
    assert "trains_stepwise" not in str(error.value)
    # the way out: the module's own forward pass
    (grad,) = torch.autograd.grad(net(x, lengths).sum(), x, create_graph=True)
    assert grad.requires_grad and bool(torch.isfinite(grad).all())
    output, _ = module(x)
    (grad,) = torch.autograd.grad(output.sum(), x, create_graph=True)
    assert grad.requires_grad


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("cell", ["tanh", "relu", "gru", "lstm"])
def test_forward_mode_derivatives_run_on_the_modules_forward_and_forward_states_names_the_way_out(cell, dtype):
    # Forward-mode AD through net(x, lengths) failed on a CPU for the cells that train
    # step by step ("You must implement the jvp function"), in eval mode too: their
    # hand-written pass has no jvp; then for the float32 LSTM, whose oneDNN kernel has
    # none either. Under a dual level they now run their plain tensor operations, as
    # under torch.func; forward_states, which must run that pass, refuses with the way out.
    import torch.autograd.forward_ad as fwAD

    from sklearn_rnn.nn import get_cell

    net = RecurrentNetwork(2, 3, 1, cell=cell, num_layers=2, hidden_init="learned",
                           generator=torch.Generator().manual_seed(0)).to(dtype)
    generator = torch.Generator().manual_seed(1)
    x, tangent = (torch.randn(3, 5, 2, dtype=dtype, generator=generator) for _ in range(2))
    lengths = torch.tensor([5, 1, 3])
    jacobian = torch.autograd.functional.jacobian(lambda v: net(v, lengths), x)  # (3, 1, 3, 5, 2)
    expected = (jacobian * tangent).sum(dim=(2, 3, 4))  # J v, by reverse mode
    for training in (True, False):
        net.train(training)
        with fwAD.dual_level():
            output = net(fwAD.make_dual(x, tangent), lengths)
            torch.testing.assert_close(fwAD.unpack_dual(output).tangent, expected)
    assert get_cell(cell).temporal_gradients  # forward_states runs the step loop on a CPU
    with fwAD.dual_level(), pytest.raises(
        RuntimeError, match=rf"forward-mode derivative \(jvp\) of .* cell '{cell}'.*module's own forward pass"
    ):
        net.forward_states(fwAD.make_dual(x, tangent), lengths)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_given_lengths_the_elman_recurrence_stops_each_state_at_its_end(nonlinearity):
    """Zeros at the padded steps, and the gradients of each sequence run alone."""
    gen = torch.Generator().manual_seed(0)
    projected = torch.randn(3, 7, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = (torch.randn(4, 4, generator=gen, dtype=torch.float64) * 0.8).requires_grad_()
    lengths = torch.tensor([7, 3, 1])
    u, hidden, _ = stepwise_recurrence(nonlinearity, projected, weight, None, (), lengths=lengths)
    padded = torch.arange(7)[None, :] >= lengths[:, None]
    assert bool((hidden[padded] == 0).all())
    hidden.sum().backward()  # padded steps included: their states depend on nothing
    alone_projected, alone_weight = torch.zeros_like(projected), torch.zeros_like(weight)
    for row, length in enumerate(lengths.tolist()):
        part = projected[row : row + 1, :length].detach().requires_grad_()
        _, states, _ = stepwise_recurrence(nonlinearity, part, weight, None, ())
        grad_part, grad_weight = torch.autograd.grad(states.sum(), (part, weight))
        alone_projected[row, :length] = grad_part[0]
        alone_weight += grad_weight
    torch.testing.assert_close(projected.grad, alone_projected)
    torch.testing.assert_close(weight.grad, alone_weight)


def test_stepwise_recurrence_refuses_weights_biases_and_lengths_of_another_shape():
    # A GRU's weight_ih passed for weight_hh, a bias of the wrong size and a list of
    # lengths met raw matmul, reshape and AttributeError messages (cells43 review).
    from sklearn_rnn.nn.cells import stepwise_recurrence

    gru = torch.nn.GRU(4, 2, batch_first=True)
    projected = torch.randn(3, 5, 6)
    with pytest.raises(ValueError, match=r"weight_hh must be a tensor of shape \(3 \* hidden, hidden\) for cell='gru'"
                                         r".*got \(6, 4\)"):
        stepwise_recurrence("gru", projected, gru.weight_ih_l0, gru.bias_hh_l0, ())
    with pytest.raises(ValueError, match=r"bias_hh must have shape \(6,\), one per row of weight_hh; got \(2,\)"):
        stepwise_recurrence("gru", projected, gru.weight_hh_l0, torch.randn(2), ())
    with pytest.raises(ValueError, match=r"lengths must be a tensor of shape \(batch,\) = \(3,\).*got list"):
        stepwise_recurrence("gru", projected, gru.weight_hh_l0, gru.bias_hh_l0, (), lengths=[5, 2, 3])
    u, h, _ = stepwise_recurrence("gru", projected, gru.weight_hh_l0, gru.bias_hh_l0, (),
                                  lengths=torch.tensor([5, 2, 3]))
    assert h.shape == (3, 5, 2)
