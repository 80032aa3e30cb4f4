"""More Python coverage: small functions compared against eager on two or more inputs."""
import collections
import enum

import pytest
import torch
import torch.nn.functional as F

from capture_helpers import check

torch.manual_seed(1)
CASES = []


def r(*shape, **kw):
    return torch.randn(*shape, **kw)


def case(*input_sets, graphs=None, fallback_ok=False, breaks=None):
    def deco(fn):
        CASES.append(pytest.param(fn, input_sets, graphs, fallback_ok, breaks, id=fn.__name__))
        return fn
    return deco


TWO = ((r(3, 4),), (r(2, 4),))
COUNTER = {"n": 0}
Pair = collections.namedtuple("Pair", "a b")


class Mode(enum.Enum):
    FAST = 1
    SLOW = 2


@case(*TWO)
def autocast_region(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.mm(x, x.t())
    return y.float(), y.dtype


@case(*TWO)
def autocast_disabled(x):
    with torch.autocast("cpu", enabled=False):
        y = x @ x.t()
    return y


@case(*TWO)
def size_arithmetic(x):
    s = x.shape
    return x.new_zeros(s) + x.new_ones(*s), s[-1], tuple(s) + (1,), s.numel(), max(s)


@case(*TWO)
def star_shape(x):
    return x.reshape(*x.shape, 1).expand(*x.shape, 2)


@case(*TWO)
def tensor_from_python(x):
    t = torch.tensor([1.0, 2.0, 3.0, 4.0])
    return x * t, torch.tensor(3) + x, torch.as_tensor([[1, 2]])


@case(*TWO)
def chained_comparison(x):
    n = x.shape[0]
    return x * 2 if 0 < n < 5 else x, 1 <= n <= 2


@case(*TWO)
def del_statement(x):
    y = x * 2
    z = y + 1
    del y
    return z


@case(*TWO)
def list_element_augassign(x):
    items = [x, x * 2]
    items[0] += 1
    items[1] = items[1] * 3
    return items


@case(*TWO)
def enumerate_start(x):
    out = x
    for i, v in enumerate([1.0, 2.0], start=1):
        out = out + i * v
    return out


@case(*TWO)
def unbind_unpack(x):
    a, b = x[:2].unbind(0)
    return a * b


@case(*TWO)
def sum_of_tensor_list(x):
    return sum([x * i for i in range(3)]), sum([x, x], x)


@case(*TWO)
def lambda_default_capture(x):
    fs = [lambda t, k=k: t * k for k in range(3)]
    return [f(x) for f in fs]


@case(*TWO)
def sorted_with_key(x):
    names = sorted(["bb", "a", "ccc"], key=len)
    return x * len(names[0]), names


@case(*TWO)
def string_methods(x):
    s = "Hello, World"
    parts = s.lower().split(", ")
    return x + len(parts[1]), s.startswith("He"), "-".join(parts), s.replace("l", "L"), f"{s!s:>15}"


@case(*TWO)
def enum_values(x):
    mode = Mode.FAST
    return x * mode.value if mode is Mode.FAST else x, Mode.SLOW.name


@case(*TWO)
def namedtuple_methods(x):
    p = Pair(x, 2)
    q = p._replace(b=3) if False else Pair(p.a, 3)
    return p.a * q.b, isinstance(p, tuple), len(p)


@case(*TWO)
def kwonly_and_defaults(x):
    def g(a, *, scale=2, shift):
        return a * scale + shift
    return g(x, shift=1), g(x, scale=3, shift=0)


@case(*TWO)
def posonly_args(x):
    def g(a, b=1, /, c=2):
        return a * b + c
    return g(x), g(x, 2, c=3)


class K:
    base = 3

    @staticmethod
    def twice(t):
        return t * 2

    @classmethod
    def plus_base(cls, t):
        return t + cls.base


@case(*TWO)
def staticmethod_classmethod(x):
    return K.twice(x), K.plus_base(x), K().twice(x)


@case(*TWO)
def nested_with_blocks(x):
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x.t()
        z = y.float() + 1
    return z


@case(*TWO)
def functional_misc(x):
    return (F.pad(x, (1, 1)), F.one_hot(torch.arange(3), 4), F.cross_entropy(x, torch.zeros(x.shape[0], dtype=torch.long)),
            F.mse_loss(x, x * 0.5), F.embedding(torch.tensor([0, 1]), x), F.linear(x, torch.ones(2, 4)))


@case(*TWO)
def cumulative_ops(x):
    return x.cumsum(1), torch.cumprod(x, 0), x.sort(1).values, x.topk(2, dim=1).indices, x.argmax(1)


@case(*TWO)
def view_ops_inplace(x):
    y = x.clone()
    v = y[:, :2]
    v.mul_(0)
    return y, v


@case(*TWO)
def masked_fill_where(x):
    m = x > 0
    return x.masked_fill(m, 0.0), torch.where(m, x, torch.zeros_like(x)), m.any(), m.float().mean()


@case(*TWO)
def global_dict_read(x):
    return x + COUNTER["n"]


@case(*TWO)
def tuple_compare_and_in(x):
    shape = tuple(x.shape)
    return x * 2 if shape == (3, 4) else x, 4 in shape, shape[::-1]


@case(*TWO)
def dict_iteration_order(x):
    d = dict(a=1, b=2)
    d["c"] = 3
    keys = [k for k in d]
    vals = list(d.values())
    return x * sum(vals), keys, dict(zip(keys, vals))


@case(*TWO)
def conditional_expression_chain(x):
    n = x.shape[0]
    kind = "big" if n > 2 else "small" if n > 1 else "tiny"
    return x * {"big": 3, "small": 2, "tiny": 1}[kind], kind


@case(*TWO)
def while_with_tensor_accumulate(x):
    acc = torch.zeros_like(x)
    k = 0
    while k < x.shape[0]:
        acc[k] = x[k] * k
        k += 1
    return acc


@case(*TWO)
def numel_and_bool_list(x):
    return x.numel() > 5, bool([]), bool([x]), not ()


@case(*TWO)
def returns_none(x):
    x.add_(1)


@case(*TWO)
def returns_input(x):
    return x


@case(*TWO)
def returns_same_tensor_twice(x):
    y = x + 1
    return y, y, [y]


@case(*TWO)
def noop_constant_function(x):
    return 42


@case((r(4), 2), (r(4), 3), graphs=2)
def int_argument_specialized(x, k):
    return x.repeat(k), x * k


@case((r(4), None), (r(4), r(4)), graphs=1)  # `return x` alone makes no graph
def optional_tensor_arg(x, bias):
    if bias is not None:
        x = x + bias
    return x


@case((r(4), "relu"), (r(4), "tanh"), graphs=2)
def string_argument_dispatch(x, act):
    return getattr(torch, act)(x)


@case((r(4), torch.float64), (r(4), torch.float16), graphs=2)
def dtype_argument(x, dtype):
    return x.to(dtype) * 2


@case(*TWO)
def split_with_sizes(x):
    a, b = x.split([1, 3], dim=1)
    return a.sum() + b.sum(), [p.shape for p in x.split(2)]


@case(*TWO)
def clone_detach_contig(x):
    return x.clone().detach(), x.t().contiguous().is_contiguous(), x.detach().requires_grad


@pytest.mark.parametrize("fn, input_sets, graphs, fallback_ok, breaks", CASES)
def test_case(fn, input_sets, graphs, fallback_ok, breaks):
    check(fn, *input_sets, graphs=graphs, fallback_ok=fallback_ok, breaks=breaks)


class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


class WithEq:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return self.v == other.v


EQ_A, EQ_B = WithEq(1), WithEq(1)


@case(*TWO)
def custom_eq_objects(x):
    return x * 2 if EQ_A == EQ_B else x


@case(*TWO)
def inplace_identity(x):
    y = x.clone()
    z = y.add_(1)
    w = y.add(1)
    return z is y, w is y, z


@case(*TWO)
def list_grows_while_iterating(x):
    items = [x]
    for t in items:
        if len(items) < 4:
            items.append(t * 2)
    return items


def test_callable_object_capture():
    s = Scaler(3.0)
    check(s, (torch.randn(2),), (torch.randn(3),), graphs=2)


@case((r(3, requires_grad=True),), (r(4, requires_grad=True),), graphs=4)
def break_inside_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("inside no_grad")
        z = y + 1
    return z, x * 3, z.requires_grad, torch.is_grad_enabled()


@case(*TWO)
def break_inside_no_grad_item(x):
    with torch.no_grad():
        s = x.sum().item()
    return x * s


@case(*TWO)
def break_with_null_on_stack(x):
    return torch.add(x, x.sum().item())


@case(*TWO)
def break_in_method_chain(x):
    return x.mul(float(x.max())).relu()


@case(*TWO)
def break_while_building_list(x):
    return [x * 2, print("building"), x + 1]


@case(*TWO)
def break_in_keyword_argument(x):
    return F.leaky_relu(x, negative_slope=0.1 if x.sum().item() > 0 else 0.2)


@case(*TWO)
def break_in_fstring(x):
    label = f"{x.sum():.2f}"
    return x * 2, len(label) > 0


@case(*TWO)
def break_inside_try(x):
    try:
        v = x.max().item()
    except RuntimeError:
        v = 0.0
    return x - v


@case(*TWO)
def two_breaks_in_sequence(x):
    a = x.sum().item()
    y = x * a
    b = y.mean().item()
    return y - b


@case(*TWO)
def numpy_roundtrip_midway(x):
    n = x.numpy() * 2
    return torch.from_numpy(n) + x


@case((r(4), [1, 2]), (r(4), [3]))
def break_mutating_input_list(x, acc):
    acc.append(x.shape[0])
    return x * len(acc)


PARAM = torch.nn.Parameter(torch.randn(4))


@case(*TWO)
def isinstance_parameter(x):
    return x * 2 if isinstance(PARAM, torch.nn.Parameter) and not isinstance(x, torch.nn.Parameter) else x, \
        type(PARAM) is torch.nn.Parameter, type(x) is torch.Tensor
