"""0-d CPU values read by CUDA kernels (Note [host scalars] in ember_inductor/lowering): a
floating 0-d CPU value that the GPU's kernels read is passed to them by value (`buf.item()` in
the wrapper, or a slot of the call's host-scalar arena read by `_hs.tolist()`) instead of being copied to the device by an eager `device_put` per use; other
dtypes keep the copy. Graphs with such values never replay as CUDA graphs (the value would be
frozen at the recording). Each result is compared with eager on fresh inputs over several calls:
float32 rtol=1e-5 atol=1e-6, bfloat16 rtol=1.6e-2 atol=1e-2 (one rounding of the product),
float64 exact to 1e-12.
"""

import pytest
import torch

import ember

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("no_fallback")]

F32 = dict(rtol=1e-5, atol=1e-6)
ADAM = dict(rtol=1e-4, atol=1e-5)  # AdamW's division by sqrt: a few ulps apart, as in test_training_step
BF16 = dict(rtol=1.6e-2, atol=1e-2)


EAGER_PUT = "a copy between devices"  # the comment on an eager device_put in the wrapper


def sources(compiled) -> str:
    return "\n".join(g.stage("generated source").text for g in ember.compile_report(compiled).graphs)


def by_value(code: str) -> bool:
    """A kernel takes a CPU value as a number: `.item()` of its buffer, or the arena's values
    (Note [host scalar arena] in ember_inductor/wrapper.py)."""
    return ".item()" in code or "_hsv = _hs.tolist()" in code


def scale_shift(x, s, t):
    a = torch.sqrt(1 - 0.999 ** s)      # CPU arithmetic on the 0-d values
    return x * a + (t / a) * x.sin()    # read by the GPU's kernel


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_scalars_reach_the_kernel_by_value(dtype):
    f = ember.compile(scale_shift)
    for step in range(1, 5):
        x = torch.randn(1000, device="cuda", dtype=dtype)
        s, t = torch.tensor(float(step)), torch.tensor(-0.25 * step, dtype=dtype)
        torch.testing.assert_close(f(x, s, t), scale_shift(x, s, t), **(F32 if dtype == torch.float32 else BF16))
    code = sources(f)
    assert by_value(code) and EAGER_PUT not in code, code


def test_float64_scalar_keeps_its_precision():
    """A float64 value is not passed as an fp32 argument: it is copied to the device."""
    f = ember.compile(lambda x, s: x * (s * 3.0))
    for k in range(3):
        x = torch.randn(64, device="cuda", dtype=torch.float64)
        s = torch.tensor(1.0 + 1e-12 * (k + 1), dtype=torch.float64)
        torch.testing.assert_close(f(x, s), x * (s * 3.0), rtol=1e-14, atol=1e-14)
    assert not by_value(sources(f))


def test_scalar_written_then_read_in_one_graph():
    """The CPU value is updated in place (an optimizer's step count) and read after the write."""
    def step(p, g, count):
        count.add_(1)
        p.sub_(g * (0.1 / (1 - 0.9 ** count)))
        return p

    p_e, p_c = torch.randn(300, device="cuda"), None
    p_c = p_e.clone()
    c_e, c_c = torch.tensor(0.0), torch.tensor(0.0)
    f = ember.compile(step)
    for _ in range(4):
        g = torch.randn(300, device="cuda")
        step(p_e, g, c_e)
        f(p_c, g, c_c)
        torch.testing.assert_close(p_c, p_e, **F32)
        assert c_c.device.type == "cpu" and c_c.item() == c_e.item()


def _twin_mlps_with_adamw():
    """A CUDA MLP, an eager copy of it, and an AdamW optimizer for each."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).cuda()
    ref = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).cuda()
    ref.load_state_dict(model.state_dict())
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (model, ref)]
    return model, ref, opts


def test_adamw_on_cuda_has_no_device_copies_per_parameter():
    model, ref, opts = _twin_mlps_with_adamw()
    f = ember.compile(lambda: opts[0].step())
    for _ in range(4):
        for m in (model, ref):
            m.zero_grad()
        x = torch.randn(16, 32, device="cuda")
        for m in (model, ref):
            m(x).square().mean().backward()
        f()
        opts[1].step()
        for a, b in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(a, b, **ADAM)
    for a, b in zip(model.parameters(), ref.parameters()):
        sa, sb = opts[0].state[a], opts[1].state[b]
        assert sa["step"].device.type == "cpu" and sa["step"].item() == sb["step"].item()
        torch.testing.assert_close(sa["exp_avg_sq"], sb["exp_avg_sq"], **ADAM)
    code = sources(f)
    assert by_value(code) and EAGER_PUT not in code, code


def test_adamw_step_warm_starts_with_its_cpu_kernels(tmp_path, monkeypatch):
    """A GPU graph with CPU kernels (the step counts' arithmetic, C++) is loaded from the warm-start
    cache with each kernel built by its own backend: a second compile of the documents' AdamW
    step hits the cache and computes eager's parameters (it used to build the C++ kernels as
    Triton ones, fail at the first call and run the step eagerly at the prims level)."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_WARM_START", "1")
    ember.reset()

    def run():
        model, ref, opts = _twin_mlps_with_adamw()

        def train(m, opt, x):
            opt.zero_grad(True)
            loss = m(x).square().mean()
            loss.backward()
            opt.step()
            return loss

        f = ember.compile(train)
        for _ in range(3):
            x = torch.randn(16, 32, device="cuda")
            torch.testing.assert_close(f(model, opts[0], x), train(ref, opts[1], x), **ADAM)
            for a, b in zip(model.parameters(), ref.parameters()):
                torch.testing.assert_close(a, b, **ADAM)
        return f

    run()
    stored = ember.cache_stats()["inductor"].get("store", 0)
    assert stored >= 3, ember.cache_stats()  # forward, backward, the optimizer's step
    ember.reset()
    f = run()
    assert ember.cache_stats()["inductor"].get("hit", 0) >= 3, ember.cache_stats()
    assert by_value(sources(f))
    ember.reset()


def test_graph_with_cpu_work_is_not_recorded():
    """Under reduce-overhead a CPU random draw (or any CPU value the GPU reads) must be drawn
    again on every call: the graph runs without a CUDA graph."""
    def noisy(x):
        return x * torch.rand(())

    f = ember.compile(noisy, mode="reduce-overhead")
    x = torch.ones(128, device="cuda")
    outs = [f(x).clone() for _ in range(5)]
    assert len({o[0].item() for o in outs}) == 5
    for o in outs:
        assert torch.all(o == o[0])
