"""Warm start (Note [warm start], Note [warm-start entries]): lowering and inductor results
cached on disk, checked when read, moved between machines."""
import json
import os
import subprocess
import sys
import threading
import warnings

import pytest
import torch

import ember
from ember import cache_store, graph_key


def step(x, w, b):
    return (torch.tanh(x @ w + b) * torch.sigmoid(x @ w)).sum()


def _inputs(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6, 5, generator=g, dtype=dtype)
    w = torch.randn(5, 4, generator=g, dtype=dtype, requires_grad=True)
    b = torch.randn(4, generator=g, dtype=dtype, requires_grad=True)
    return x, w, b


def _check(compiled, seed):
    x, w, b = _inputs(seed=seed)
    out = compiled(x, w, b)
    out.backward()
    xe, we, be = (t.detach().clone().requires_grad_(t.requires_grad) for t in (x, w, b))
    expected = step(xe, we, be)
    expected.backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(w.grad, we.grad)
    torch.testing.assert_close(b.grad, be.grad)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_WARM_START", "1")
    cache_store.COUNTERS.clear()
    ember.reset()
    yield tmp_path
    ember.reset()


def _entries(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(root, "warm")) for f in fs if f.endswith(".bin"))


def test_a_second_compile_loads_and_gives_the_same_results(cache):
    _check(ember.compile(step), seed=0)
    assert ember.cache_stats()["autograd"] == {"miss": 1, "store": 1}
    assert ember.cache_stats()["inductor"] == {"miss": 2, "store": 2}  # forward, backward
    ember.reset()
    compiled = ember.compile(step)
    _check(compiled, seed=1)  # new values, same shapes: the cached graphs
    assert ember.cache_stats()["autograd"]["hit"] == 1 and ember.cache_stats()["inductor"]["hit"] == 2
    stages = {(s.layer, s.stage) for s in ember.compile_record(compiled).steps}
    assert ("autograd", "cache_load") in stages and ("inductor", "cache_load") in stages
    assert ("autograd", "trace") not in stages and ("inductor", "fuse") not in stages
    x, w, b = _inputs(torch.float64)  # another dtype: another key, compiled and stored
    torch.testing.assert_close(compiled(x, w, b), step(x, w, b))
    assert ember.cache_stats()["autograd"]["store"] == 2


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip"])
def test_a_corrupt_entry_is_discarded_with_one_warning(cache, damage):
    _check(ember.compile(step), seed=0)
    paths = _entries(cache)
    assert len(paths) == 3
    for path in paths:
        blob = open(path, "rb").read()
        damaged = {"truncate": blob[: len(blob) // 2], "garbage": b"not an entry",
                   "flip": blob[:-1] + bytes([blob[-1] ^ 1])}[damage]
        open(path, "wb").write(damaged)
    ember.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _check(ember.compile(step), seed=2)
    corrupt = [w for w in caught if "warm-start cache entry" in str(w.message)]
    assert len(corrupt) == 3 and all("discarded" in str(w.message) for w in corrupt)
    assert sum(ember.cache_stats()[k].get("corrupt", 0) for k in ("autograd", "inductor")) == 3
    assert len(_entries(cache)) == 3  # compiled again and stored again, whole
    for path in _entries(cache):
        cache_store.read(str(cache), path.split(os.sep)[-3], os.path.basename(path)[:-4])
    assert sum(ember.cache_stats()[k].get("corrupt", 0) for k in ("autograd", "inductor")) == 3


def test_readers_never_see_a_torn_entry(tmp_path):
    payloads = [bytes([i]) * 3_000_000 for i in range(4)]
    stop = threading.Event()

    def writer(i):
        while not stop.is_set():
            cache_store.write(str(tmp_path), "test", "k" * 64, payloads[i])

    cache_store.write(str(tmp_path), "test", "k" * 64, payloads[0])  # readers always find an entry
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        seen = 0
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a corrupt read would warn
            for _ in range(200):
                value = cache_store.read(str(tmp_path), "test", "k" * 64)
                if value is not None:
                    assert value in payloads[:2]
                    seen += 1
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert seen == 200 and cache_store.COUNTERS["test"]["corrupt"] == 0
    assert cache_store.COUNTERS["test"]["store"] > 1  # the writers replaced it while it was read


def test_save_and_load_cache_artifacts(cache, tmp_path_factory, monkeypatch):
    _check(ember.compile(step), seed=0)
    blob = ember.save_cache_artifacts()
    elsewhere = tmp_path_factory.mktemp("other_machine")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(elsewhere))
    assert ember.load_cache_artifacts(blob) == 3
    ember.reset()
    cache_store.COUNTERS.clear()
    _check(ember.compile(step), seed=3)
    assert ember.cache_stats()["autograd"]["hit"] == 1 and ember.cache_stats()["inductor"]["hit"] == 2
    with pytest.raises(ValueError, match="save_cache_artifacts"):
        ember.load_cache_artifacts(b"something else")


def test_keys_follow_what_changes_the_code():
    gm = torch.fx.symbolic_trace(lambda x: torch.sin(x) + 1)
    for n in gm.graph.nodes:
        if n.op != "output":
            n.meta["val"] = torch.empty(3, 4, device="meta")
    key = graph_key.fingerprint(gm)
    assert key == graph_key.fingerprint(gm) and len(key) == 64
    next(iter(gm.graph.nodes)).meta["val"] = torch.empty(3, 4, dtype=torch.float64, device="meta")
    assert graph_key.fingerprint(gm) != key
    assert graph_key.describe_fields(ember_autograd_config(frozenset({"b::x", "a::y"}))) == \
        graph_key.describe_fields(ember_autograd_config(frozenset({"a::y", "b::x"})))


def ember_autograd_config(view_ops):
    import ember_autograd
    return ember_autograd.AotConfig(view_ops=view_ops)


SCRIPT = r'''
import json, sys, time, torch, ember
sys.path.insert(0, sys.argv[1])
from test_warm_start import _check, step
compiled = ember.compile(step)
start = time.perf_counter()
_check(compiled, seed=int(sys.argv[2]))
print(json.dumps({"first_call_s": time.perf_counter() - start, "stats": ember.cache_stats()}))
'''


def test_a_second_process_loads_instead_of_compiling(tmp_path):
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache"), "EMBER_WARM_START": "1",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = []
    for seed in (0, 1):
        if seed == 1:
            env["EMBER_TRACE"] = str(tmp_path / "trace")  # the warm process writes its report at exit
        proc = subprocess.run([sys.executable, "-c", SCRIPT, os.path.dirname(__file__), str(seed)],
                              env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["stats"]["autograd"].get("hit", 0) == 0 and cold["stats"]["inductor"]["store"] == 2
    assert warm["stats"]["autograd"] == {"hit": 1} and warm["stats"]["inductor"] == {"hit": 2}
    reports = os.listdir(tmp_path / "trace")
    assert len(reports) == 1 and reports[0].startswith("ember_report_")
    page = open(tmp_path / "trace" / reports[0], encoding="utf-8").read()
    assert "cache_load" in page and "generated source forward" in page


def test_a_users_function_is_keyed_on_its_code():
    def make(body):
        scope = {"torch": torch}
        exec(f"class Double(torch.autograd.Function):\n"
             f"    @staticmethod\n    def forward(ctx, x):\n        return {body}\n"
             f"    @staticmethod\n    def backward(ctx, g):\n        return g * 2\n", scope)
        scope["Double"].__module__ = "user_code"
        return scope["Double"].apply

    assert graph_key.describe(make("x * 2")) == graph_key.describe(make("x * 2"))
    assert graph_key.describe(make("x * 2")) != graph_key.describe(make("x * 3"))
    assert "#" not in graph_key.describe(torch.sin)  # torch's own: keyed by its version
    torch.library.define("ember_test_ws::twice", "(Tensor x) -> Tensor")
    with pytest.raises(cache_store.Uncacheable, match="not an aten or ember_prims op"):
        graph_key.describe(torch.ops.ember_test_ws.twice.default)
    # a graph that calls such an op (or one ember_autograd generated: Note [auto-functionalization])
    # is not stored: another process may not have the op, and loading it would fail
    graph = torch.fx.Graph()
    graph.output(graph.call_function(torch.ops.ember_test_ws.twice.default, (graph.placeholder("x"),)))
    with pytest.raises(cache_store.Uncacheable, match="not an aten or ember_prims op"):
        graph_key.to_data(torch.fx.GraphModule(torch.nn.Module(), graph))


class _ConvHead(torch.nn.Module):
    """Triton kernels (batch norm, ReLU, the pooling), cuDNN and cuBLAS externs, a bias in the
    product (Note [bias in the matmul])."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


@pytest.mark.gpu
def test_gpu_graphs_warm_start_by_default_and_compute_the_same(cache, monkeypatch):
    """Note [warm start on GPUs]: without EMBER_WARM_START, a CUDA model's forward and backward
    are stored, a second compile loads them, and the loaded kernels give the first compile's
    results and eager's, on new inputs too."""
    monkeypatch.delenv("EMBER_WARM_START")
    torch.manual_seed(0)
    model = _ConvHead().cuda()
    xs = [torch.randn(4, 3, 16, 16, device="cuda") for _ in range(2)]

    def results(fn):
        out = []
        for x in xs:
            model.zero_grad()
            y = fn(x)
            y.square().sum().backward()
            out += [y.detach().clone(), *(p.grad.clone() for p in model.parameters())]
        return out

    expected = results(model)
    first = results(ember.compile(model))
    assert ember.cache_stats()["inductor"].get("store", 0) >= 2, ember.cache_stats()
    ember.reset()
    again = results(ember.compile(model))
    assert ember.cache_stats()["inductor"].get("hit", 0) >= 2, ember.cache_stats()
    for a, f, e in zip(again, first, expected):
        torch.testing.assert_close(a, f, rtol=1e-5, atol=1e-6)  # cuDNN may sum in another order
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-4)


def test_a_cached_graph_keeps_which_outputs_reach_each_gradient():
    # Note [gradients eager computes from no tangent] (ember_autograd/unreached.py): a backward
    # loaded from the cache prunes for unreached outputs as the one just lowered does
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(torch.ops.aten.neg.default, (x,))
    y.meta["ember_grad_reach"] = frozenset({1})
    graph.output((y,))
    back = graph_key.from_data(graph_key.to_data(torch.fx.GraphModule(torch.nn.Module(), graph)))
    assert [n.meta.get("ember_grad_reach") for n in back.graph.nodes] == [None, frozenset({1}), None]
