"""CUDA graphs where there is no GPU, and the facade's side of them that needs none: the two
spellings of the option, the log, which inputs count as parameters and buffers."""
import pytest
import torch

import ember
import ember.cudagraphs as cudagraphs
from ember.cudagraphs import AddressCheck, CopyOut, GraphRunner, address_check, graph_label, static_positions
from ember_capture import native
from ember.settings import make_settings

pytestmark = pytest.mark.usefixtures("fresh_ember")
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.bn = torch.nn.BatchNorm1d(8)

    def forward(self, x):
        return torch.relu(self.bn(self.lin(x)))


@no_cuda
@pytest.mark.parametrize("kwargs", [dict(mode="reduce-overhead"), dict(options={"triton.cudagraphs": True}),
                                    dict(options={"cudagraphs": True})])
def test_reduce_overhead_without_a_gpu_runs_and_says_why_once(kwargs):
    model = Net().eval()
    with pytest.warns(UserWarning, match="CUDA graphs .* need a CUDA device") as record:
        f = ember.compile(model, **kwargs)
    assert len([w for w in record if "CUDA graphs" in str(w.message)]) == 1
    with torch.no_grad():
        for _ in range(3):  # new inputs each call: the guards' second call too
            x = torch.randn(4, 8)
            torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-5)


@no_cuda
def test_cudagraphs_backend_without_a_gpu_is_unavailable_and_says_why():
    assert "cudagraphs" not in ember.list_backends()
    with pytest.raises(ember.BackendUnavailable, match="no CUDA device"):
        ember.compile(Net(), backend="cudagraphs")


def test_torch_spelling_of_the_option_is_the_inductors_cudagraphs():
    settings = make_settings(backend_name="inductor", fullgraph=False, dynamic=None, mode=None,
                             options={"triton.cudagraphs": True}, env={})
    assert settings.options == {"cudagraphs": True}
    assert make_settings(backend_name="inductor", fullgraph=False, dynamic=None, mode="reduce-overhead",
                         options=None, env={}).options["cudagraphs"] is True


def test_cudagraphs_is_a_log_name():
    settings = make_settings(backend_name="inductor", fullgraph=False, dynamic=None, mode=None,
                             options=None, env={"EMBER_LOGS": "cudagraphs"})
    assert settings.logs == {"cudagraphs"}


def test_parameters_and_buffers_are_the_static_inputs():
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward

    model = Net()
    ember.compile(model, backend=backend)(torch.randn(4, 8))
    gm, example_inputs = seen[0]
    static = static_positions(gm, example_inputs)
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    names = {n.name for k, n in enumerate(p for p in gm.graph.nodes if p.op == "placeholder") if k in static}
    state = {id(t) for t in [*model.parameters(), *model.buffers()]}
    assert {k for k, t in enumerate(tensors) if id(t) in state} == static
    assert len(static) == len(tensors) - 1 and len(names) == len(static)  # all but the batch
    assert graph_label(gm).startswith("the graph at test_cudagraphs_cpu.py:")


def test_graph_runner_on_cpu_inputs_runs_the_function_every_call():
    calls = []

    def fn(args):
        calls.append(args)
        return [args[0] + args[1]]

    fn._boxed_call = True
    runner = GraphRunner(fn, label="a graph", pool=None)
    assert runner._boxed_call  # called f(list) by ember_autograd
    for _ in range(4):  # past the warm-up and the recording call: no graph on the CPU
        x, y = torch.randn(3), torch.randn(3)
        torch.testing.assert_close(runner([x, y])[0], x + y)
    assert len(calls) == 4 and runner.rec is None and runner.disabled == "an input is not a CUDA tensor"


def test_backward_outputs_are_copied_out_of_the_pool():
    """CopyOut (a backward replay's gradients): each copy equals its source, keeps its shape and
    strides, and keeps its values when the source is overwritten (by the next replay)."""
    sources = [torch.randn(3, 4), torch.randn(5), torch.randn(4, 3).t(), None, torch.arange(6),
               torch.arange(4), torch.randn(2, 2), 7, torch.randn(0, 3), torch.randn(1)]
    before = [s.clone() if isinstance(s, torch.Tensor) else s for s in sources]
    plan = CopyOut(sources)
    copies = plan.copies()
    for src in sources:
        if isinstance(src, torch.Tensor):
            src.fill_(1)  # the next replay writes the pool
    for got, src, old, fresh in zip(copies, sources, before, plan.copies()):
        if not isinstance(src, torch.Tensor):
            assert got is src
            continue
        assert got.shape == src.shape and got.stride() == src.stride() and got.dtype == src.dtype
        torch.testing.assert_close(got, old)    # kept its values
        torch.testing.assert_close(fresh, src)  # a later copy sees the new ones


@pytest.fixture(params=["native", "python"])
def address_checks(request, monkeypatch):
    """Both address checks of Note [Native address check]: the extension's, and the Python one
    used until it is loaded or where it cannot be built."""
    if request.param == "native":
        if not native.wait():
            pytest.skip("the native extension could not be built on this machine")
    else:
        monkeypatch.setattr(native._STATE, "forced_python", True)
    return request.param


def test_address_check_sees_every_move(address_checks):
    moves = [
        lambda a: a.__setitem__(3, torch.nn.Parameter(a[3].detach().clone())),  # replaced
        lambda a: setattr(a[2], "data", torch.randn(4, 3)),                     # .data swapped
        lambda a: a[4].set_(torch.randn(4, 3)),                                  # set_()
        lambda a: a.__setitem__(5, a[5].detach()[1:]),                          # an offset view
        lambda a: a.__setitem__(1, None),                                       # not a tensor
        lambda a: a.pop(),                                                      # too few
    ]
    for move in moves:
        args = [torch.randn(2, 3), *(torch.nn.Parameter(torch.randn(4, 3)) for _ in range(5))]
        check = address_check(args, range(1, 6))
        assert isinstance(check, AddressCheck) is (address_checks == "python")
        assert check(args) is True and check(tuple(args)) is True
        assert check([args[0].clone(), *args[1:]]) is True  # the batch is not checked
        same_memory = [args[0], *(torch.nn.Parameter(p.detach()) for p in args[1:])]
        assert check(same_memory) is True  # other objects, same addresses
        with torch.no_grad():
            move(args)
        assert check(args) is False



def test_address_check_made_before_the_extension_loads_uses_it_once_loaded(monkeypatch):
    """A graph recorded while the extension still builds (a fresh machine) checks in Python, and
    in one native call from the first replay after it is loaded, with the same answers."""
    if not native.wait():
        pytest.skip("the native extension could not be built on this machine")
    args = [torch.randn(2, 3), *(torch.nn.Parameter(torch.randn(4, 3)) for _ in range(3))]
    monkeypatch.setattr(native._STATE, "forced_python", True)
    check = address_check(args, range(1, 4))
    assert isinstance(check, AddressCheck) and check(args) is True and check._native is None
    monkeypatch.setattr(native._STATE, "forced_python", False)
    assert check(args) is True and check._native is not None
    with torch.no_grad():
        args[2].data = torch.randn(4, 3)
    assert check(args) is False

class _ReplayOnCpu:
    """What a CUDA graph does on replay, on the CPU: the recorded body runs again on the recorded
    inputs and writes the recorded outputs in place (ember's `_capture` is what is replaced)."""

    def __init__(self, body):
        self.body, self.outs = body, body()

    def replay(self):
        for out, new in zip(self.outs, self.body()):
            out.copy_(new)


def _cpu_capture(pool, body):
    graph = _ReplayOnCpu(body)
    return graph, graph.outs


def test_graph_runner_rerecords_when_a_parameter_moves(address_checks, monkeypatch):
    """A replay reads a static input at its recorded address: a parameter swapped through
    `.data`, replaced, or `set_()` must make the runner record again, never replay stale
    weights."""
    monkeypatch.setattr(cudagraphs, "_capture", _cpu_capture)
    monkeypatch.setattr(cudagraphs, "_is_cuda", lambda v: isinstance(v, torch.Tensor))

    def fn(args):
        return [args[0] @ args[1] + args[2]]

    fn._boxed_call = True
    w, b = torch.nn.Parameter(torch.randn(3, 3)), torch.nn.Parameter(torch.randn(3))
    runner = GraphRunner(fn, label="a graph", pool=cudagraphs.Pool((0, 0)), static_hint=frozenset({1, 2}))
    changes = [lambda: None, lambda: setattr(w, "data", torch.randn(3, 3)),
               lambda: b.set_(torch.randn(3)), lambda: None]
    with torch.no_grad():
        for change in changes:
            change()
            for _ in range(3):
                x = torch.randn(2, 3)
                out = runner([x, w, b])[0]
                torch.testing.assert_close(out, x @ w + b)
                del out
    assert runner.recordings == 3 and runner.replays >= 6
