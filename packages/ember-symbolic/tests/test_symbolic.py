"""SymNode and SizeEnv: arithmetic, decisions recorded as guards, and torch's meta kernels running
on fake tensors with symbolic sizes."""
import pytest
import sympy
import torch
import torch.nn.functional as F

from ember_symbolic import SizeEnv, expr_of, fake_with_sizes, hint_of, plain_fake_mode


def test_arithmetic_builds_expressions_with_hints():
    env = SizeEnv()
    n = env.symint(8, "x.size(0)")
    m = env.symint(5, "x.size(1)")
    v = (n * m + 3) // 2
    assert str(expr_of(v)) == "floor(s0*s1/2 + 3/2)" or hint_of(v) == 21
    assert hint_of(v) == (8 * 5 + 3) // 2
    assert hint_of(n % 3) == 2 and hint_of(-n) == -8 and hint_of(n / 2) == 4.0
    assert env.guards == []  # arithmetic decides nothing


def test_sizes_0_and_1_are_specialized():
    env = SizeEnv()
    assert env.symint(1, "a") == 1 and env.symint(0, "b") == 0
    assert env.hints == {}


def test_decisions_become_guards_and_bounds_decide_some():
    env = SizeEnv()
    n = env.symint(8, "n")
    assert (n != 1) and not (n == 0)  # decided by the bound n >= 2: no guard
    assert env.guards == []
    assert n > 4
    assert env.guards == [sympy.Gt(sympy.Symbol("s0", integer=True, positive=True), 4)]
    assert env.guards_hold({"s0": 9}) and not env.guards_hold({"s0": 3})
    assert int(n) == 8  # int() specializes
    assert env.specialized() == {sympy.Symbol("s0", integer=True, positive=True): 8}
    assert not env.guards_hold({"s0": 9})


def test_guard_code_is_python():
    env = SizeEnv()
    n = env.symint(12, "n")
    assert (n // 4) % 3 == 0
    code = env.guard_code({sympy.Symbol("s0", integer=True, positive=True): "N"})
    assert eval(code, {"N": 12}) and not eval(code, {"N": 16}) and eval(code, {"N": 24})


def test_formatting_specializes():
    env = SizeEnv()
    n = env.symint(10, "n")
    assert f"{int(n):03d}" == "010"
    assert env.specialized()


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_meta_kernels_on_symbolic_fakes(device):
    env = SizeEnv()
    mode = plain_fake_mode()
    b, s = env.symint(4, "b"), env.symint(7, "s")
    x = fake_with_sizes(mode, torch.empty(4, 7, 32), (b, s, 32)).to(device) if device == "cpu" else \
        fake_with_sizes(mode, torch.empty(4, 7, 32), (b, s, 32))
    with mode:
        w = torch.empty(64, 32, device=x.device)
        y = F.linear(x, w).relu()
        assert [hint_of(d) for d in y.shape] == [4, 7, 64]
        assert expr_of(y.stride(0)) == expr_of(s) * 64
        q = y.view(b * s, 64).softmax(-1).view(b, s, 4, 16).transpose(1, 2)
        assert expr_of(q.shape[2]) == expr_of(s)
        att = q @ q.transpose(-1, -2)
        assert [hint_of(d) for d in att.shape] == [4, 4, 7, 7]
        z = torch.cat([y, y], dim=1)[:, 1:]
        assert hint_of(z.shape[1]) == 13
        ln = F.layer_norm(y, (64,)) + y.mean(dim=1, keepdim=True)
        assert expr_of(ln.shape[1]) == expr_of(s)
        r = y.reshape(-1).sum()
        assert r.shape == ()
    assert env.guards == []  # shape arithmetic needed no decision


def test_a_pinned_symbol_is_replaced_everywhere():
    env = SizeEnv()
    mode = plain_fake_mode()
    b, d = env.symint(4, "x.size(0)"), env.symint(32, "x.size(1)")
    x = fake_with_sizes(mode, torch.empty(4, 32), (b, d))
    with mode:
        y = F.layer_norm(x, (32,), torch.empty(32), torch.empty(32))  # the meta kernel pins d == 32
    assert env.replacements == {sympy.Symbol("s1", integer=True, positive=True): 32}
    assert expr_of(x.shape[1]) == 32 and expr_of(y.stride(0)) == 32
    assert env.guards_hold({"s0": 9, "s1": 32}) and not env.guards_hold({"s0": 9, "s1": 31})


def test_two_symbols_found_equal_become_one():
    env = SizeEnv()
    n, m = env.symint(8, "x.size(0)"), env.symint(8, "y.size(0)")
    assert n == m  # a decision: guard, and m is replaced by n
    assert expr_of(m * 2) == expr_of(n) * 2



def test_constant_pad_nd_with_symbolic_pads_has_a_fake_kernel():
    # Note [fake kernels for symbolic sizes]: torch's kernel takes plain ints and raised here
    env = SizeEnv()
    mode = plain_fake_mode()
    s = env.symint(7, "s")
    bias = fake_with_sizes(mode, torch.empty(2, 4, 7, 7), (2, 4, s, s))
    with mode:
        out = torch.ops.aten.constant_pad_nd.default(bias, [0, 16 - s % 16])
    assert hint_of(out.shape[-1]) == 16 and expr_of(out.shape[-2]) == expr_of(s)
    assert env.guards == []
