"""Python coverage (issue 3): small functions compared against eager on two or more inputs.

Each case runs eagerly and captured on every input set; a second shape forces a recompile.
``graphs`` pins the number of graphs where it matters; ``fallback_ok`` marks the few cases
whose whole frame is expected to run eagerly.
"""
import collections
import dataclasses
import functools
import math

import pytest
import torch
import torch.nn.functional as F

from capture_helpers import check

torch.manual_seed(0)
CASES = []


def r(*shape, **kw):
    return torch.randn(*shape, **kw)


def case(*input_sets, graphs=None, fallback_ok=False, breaks=None):
    def deco(fn):
        CASES.append(pytest.param(fn, input_sets, graphs, fallback_ok, breaks, id=fn.__name__))
        return fn
    return deco


TWO = ((r(3, 4),), (r(5, 4),))
TWO2 = ((r(3, 4), r(3, 4)), (r(2, 4), r(2, 4)))

# ---- arithmetic and tensor methods -------------------------------------------------------


@case(*TWO2, graphs=2)
def add_mul(x, y):
    return x * y + x - y / 2


@case(*TWO2)
def all_binary_ops(x, y):
    return x + y, x - y, x * y, x / (y.abs() + 1), x ** 2, x // 1.5, x % 2.0, x @ y.T, -x, +x


@case((torch.randint(0, 8, (4,)), torch.randint(0, 8, (4,))), (torch.randint(0, 8, (6,)), torch.randint(0, 8, (6,))))
def int_bit_ops(a, b):
    return a & b, a | b, a ^ b, ~a, a << 1, a >> 1


@case(*TWO2)
def comparisons(x, y):
    return x < y, x <= y, x > y, x >= y, x == y, x != y


@case(*TWO)
def scalar_on_left(x):
    return 2 - x, 3 / (x.abs() + 1), 2 ** x, 1 + x


@case(*TWO)
def inplace_ops(x):
    y = x.clone()
    y += 1
    y *= 2
    y.sub_(0.5)
    y.clamp_(min=-1.0)
    return y


@case(*TWO)
def inplace_on_input(x):
    x.mul_(2)
    x += 1
    return x.sum()


@case(*TWO)
def tensor_methods(x):
    return x.relu().sigmoid().tanh().exp().log1p().sqrt().neg().abs()


@case(*TWO)
def reductions(x):
    return x.sum(), x.mean(1), x.amax(0), x.std(), x.var(dim=1, keepdim=True), x.prod(0), x.norm()


@case(*TWO)
def max_with_dim(x):
    values, indices = x.max(dim=1)
    res = torch.min(x, 0)
    return values, indices, res.values, res.indices


@case(*TWO)
def shape_attrs(x):
    n, m = x.shape
    return x.view(n * m).reshape(m, n) * x.size(0) + x.dim() + x.ndim + x.numel()


@case(*TWO)
def transpose_attrs(x):
    return x.T, x.mT, x.t().contiguous(), x.transpose(0, 1), x.permute(1, 0)


@case(*TWO)
def dtype_device_attrs(x):
    y = torch.zeros(x.shape, dtype=x.dtype, device=x.device)
    return y + x.to(torch.float64).float(), x.dtype == torch.float32, str(x.device)


@case((r(3, 4, dtype=torch.float64),), (r(3, 4, dtype=torch.float16),), (r(3, 4),))
def dtype_branches(x):
    if x.dtype == torch.float64:
        return x * 2
    if x.dtype is torch.float16:
        return x.float() + 1
    return x - 1


@case(*TWO)
def type_conversions(x):
    return x.double(), x.half().float(), x.long(), x.bool(), x.int().float(), x.type_as(x.double())


@case(*TWO)
def factories(x):
    return (torch.ones(3) + torch.zeros(3), torch.arange(5) * 2, torch.full((2, 2), 7.0),
            torch.eye(3), torch.linspace(0, 1, 5), torch.ones_like(x), torch.empty_like(x).fill_(3.0))


@case(*TWO)
def torch_functions(x):
    return torch.cat([x, x], 0), torch.stack([x, x]), torch.where(x > 0, x, -x), torch.clamp(x, -0.5, 0.5)


@case(*TWO)
def split_chunk(x):
    a, b = torch.chunk(x, 2, dim=1)
    parts = x.split(1, dim=0)
    return a + b, len(parts), parts[0] * 2


@case(*TWO)
def functional_ops(x):
    return (F.relu(x), F.gelu(x), F.silu(x), F.softmax(x, dim=-1), F.log_softmax(x, -1),
            F.layer_norm(x, (4,)), F.dropout(x, 0.5, training=False), F.normalize(x, dim=1))


@case(*TWO)
def einsum_matmul(x):
    return torch.einsum("ij,kj->ik", x, x), torch.matmul(x, x.T), x.mm(x.t()), torch.bmm(x[None], x.T[None])


@case(*TWO)
def complex_tensor(x):
    z = torch.complex(x, x * 2)
    return torch.view_as_real(z.conj() * z), z.real, z.imag, z.abs()


@case((r(2, 3, 8, 8),), (r(1, 3, 6, 6),))
def conv_pool(x):
    w = torch.ones(4, 3, 3, 3) / 27
    y = F.conv2d(x, w, padding=1)
    return F.max_pool2d(y, 2), F.adaptive_avg_pool2d(y, 1).flatten(1), F.interpolate(y, scale_factor=2.0)


@case(*TWO)
def random_ops(x):
    noise = torch.randn_like(x)
    mask = torch.rand(x.shape) > 0.5
    return x + noise, mask, torch.randint(0, 10, (3,)), F.dropout(x, 0.3, training=True)


@case(*TWO)
def dropout_training_flag(x):
    return F.dropout(x, p=0.5, training=x.shape[0] > 4)


@case(*TWO)
def constants_and_locals(x):
    a = 3
    b = a * 2.5
    c = -b
    name = "scale"
    return x * b + c, name.upper(), math.pi * a


@case(*TWO)
def math_module(x):
    return x * math.sqrt(2.0) + math.cos(0.5) + math.floor(2.7) + math.log(x.shape[1])


# ---- indexing ------------------------------------------------------------------------------
@case(*TWO)
def index_slices(x):
    return x[0], x[1:], x[:, 1:3], x[::2], x[-1, -1], x[..., 0], x[None], x[:, None, :], x[0:2, ...]


@case(*TWO)
def index_tensor(x):
    idx = torch.tensor([0, 1, 0])
    return x[idx], x[:, idx], x[idx, idx]


@case(*TWO, graphs=4, breaks=2)
def index_bool_mask(x):
    return x[x > 0].sum() + x.sum()


@case(*TWO)
def index_assign(x):
    y = x.clone()
    y[0] = 1.0
    y[:, 1] = y[:, 2] * 2
    y[y < 0] = 0.0
    return y


@case(*TWO)
def index_with_dynamic_slice(x):
    n = x.shape[0] // 2
    return x[:n], x[n:], x[n - 1:n + 1]


@case((r(4, 4), torch.tensor([1, 3])), (r(6, 4), torch.tensor([0, 5, 2])))
def gather_scatter(x, idx):
    return x.index_select(0, idx), torch.gather(x, 1, torch.zeros(x.shape[0], 1, dtype=torch.long)), x[idx].sum(0)


# ---- containers ----------------------------------------------------------------------------
@case(*TWO)
def tuples_lists(x):
    items = [x, x * 2, x * 3]
    t = (x, 1, "a")
    items.append(x + 1)
    items.extend([x - 1])
    first, *rest = items
    return first + rest[-1], len(items), t[1:], items[::2]


@case(*TWO)
def list_methods(x):
    lst = [x]
    lst.insert(0, x * 2)
    y = lst.pop()
    lst.reverse()
    return y + lst[0], lst.index(lst[0]) if False else 0, [1, 2, 3].count(2)


@case(*TWO)
def dict_ops(x):
    d = {"a": x, "b": x * 2}
    d["c"] = d["a"] + d["b"]
    d.update(e=x - 1)
    out = 0
    for k, v in d.items():
        out = out + v
    return out, list(d.keys()), d.get("z", 5), "a" in d, d.pop("e")


@case(*TWO)
def dict_comprehension(x):
    d = {f"k{i}": x * i for i in range(3)}
    return sum(d.values()), {k: v.sum() for k, v in d.items()}


@case(*TWO)
def set_ops(x):
    s = {1, 2, 3}
    s.add(4)
    return x * len(s), 2 in s, sorted({3, 1, 2})


@case(*TWO)
def list_comprehension(x):
    ys = [x * i for i in range(4) if i % 2 == 0]
    return torch.stack(ys), [i * i for i in range(3)]


@case(*TWO)
def nested_comprehension(x):
    return [[x[i] * j for j in range(2)] for i in range(2)]


@case(*TWO)
def generator_sum(x):
    return sum(x * i for i in range(3))


@case(*TWO)
def unpack_star(x):
    a, b, *c = range(5)
    head, *tail = [x, x + 1, x + 2]
    return x * a + b + sum(c) + head + tail[1]


@case(*TWO)
def nested_return_structure(x):
    return {"a": [x, (x * 2, {"b": x + 1})], "c": (1, None, "s")}


@case(((r(3), r(3)),), ((r(4), r(4)),))
def tuple_input(pair):
    a, b = pair
    return a * b


@case(([r(3), r(3), r(3)],), ([r(2), r(2)],))
def list_input(xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return total, len(xs)


@case(({"w": r(3), "b": r(3)},), ({"w": r(5), "b": r(5)},))
def dict_input(d):
    return d["w"] * 2 + d["b"], sorted(d.keys())


@case(({"w": r(3)}, ), ({"w": r(3), "extra": 1},))
def dict_input_keys_guard(d):
    return d["w"] + len(d)


# ---- control flow on Python values ---------------------------------------------------------
@case(*TWO)
def for_range(x):
    for i in range(3):
        x = x + i
    return x


@case(*TWO)
def for_enumerate_zip(x):
    out = []
    for i, (a, b) in enumerate(zip([x, x * 2], [1, 2])):
        out.append(a * b + i)
    return out


@case(*TWO)
def for_reversed_list(x):
    acc = x
    for k in reversed([1, 2, 3]):
        acc = acc * k
    return acc


@case(*TWO)
def while_python(x):
    i = 0
    while i < 4:
        x = x * 1.5
        i += 1
    return x


@case(*TWO)
def while_break_continue(x):
    i = 0
    while True:
        i += 1
        if i % 2:
            continue
        x = x + i
        if i > 5:
            break
    return x


@case(*TWO)
def for_over_tensor_rows(x):
    rows = []
    for row in x:
        rows.append(row.sum())
    return torch.stack(rows)


@case(*TWO)
def if_python_values(x):
    flag = x.shape[0] > 4
    if flag:
        return x + 1
    elif x.shape[1] == 4:
        return x - 1
    else:
        return x


@case(*TWO)
def ternary_and_or(x):
    a = x if x.shape[0] > 3 else -x
    b = (x.shape[0] > 1 and 2) or 3
    c = None or 5
    return a * b * c


@case(*TWO)
def early_return(x):
    if x.dim() == 2:
        return x.sum(0)
    return x


@case(*TWO)
def not_and_is(x):
    y = None
    if y is None and not False:
        y = x
    if x is not y:
        return x
    return y * 2


@case(*TWO)
def assert_python(x):
    assert x.dim() == 2, "needs 2d"
    assert isinstance(x, torch.Tensor)
    return x + 1


@case(*TWO, graphs=4)
def assert_tensor(x):
    assert (x.abs() >= 0).all()
    return x * 2


@case(*TWO)
def try_except_normal_path(x):
    try:
        y = x * 2
    except RuntimeError:
        y = x
    finally:
        z = 1
    return y + z


@case(*TWO)
def try_finally_return(x):
    try:
        return x + 1
    finally:
        pass


@case(*TWO, graphs=4)
def data_dependent_if(x):
    if x.sum() > 0:
        return x * 2
    return x * 3


@case((r(3).abs() + 0.1,), (-(r(3).abs() + 0.1),), graphs=2)  # `return y` alone makes no graph
def data_dependent_branch_signs(x):
    y = x * 2
    if y.mean() > 0:
        y = y + 1
    return y


@case(*TWO)
def item_break(x):
    s = x.sum().item()
    return x * s


@case(*TWO)
def float_of_tensor(x):
    return x * float(x.max())


@case(*TWO)
def tolist_break(x):
    vals = x[0].tolist()
    return x + vals[0], len(vals)


@case(*TWO)
def print_break(x, capsys=None):
    y = x * 2
    print("value shape", y.shape)
    return y + 1


@case(*TWO, fallback_ok=True)
def data_dependent_loop(x):
    for _ in range(3):
        if x.sum() > 0:
            x = x - 1
    return x


@case(*TWO, fallback_ok=True)
def raise_caught(x):
    try:
        raise ValueError("boom")
    except ValueError:
        return x + 1


# ---- builtins ------------------------------------------------------------------------------
@case(*TWO)
def builtins_misc(x):
    n = len(x)
    return (x * min(n, 2) + max(1, 2, 3) + abs(-2) + int(2.7) + float(3) + round(2.5) + pow(2, 3),
            bool(n), str(n), repr("a"), divmod(7, 2), any([False, True]), all([True, 1]))


@case(*TWO)
def isinstance_type(x):
    a = isinstance(x, torch.Tensor)
    b = isinstance(3, (int, float))
    c = type(x) is torch.Tensor
    d = type(3) == int
    return x if a and b and c and d else -x


@case(*TWO)
def getattr_hasattr(x):
    s = getattr(x, "shape")
    f = getattr(x, "nonexistent_attr", 7)
    return x * f + s[0], hasattr(x, "sum"), hasattr(x, "nope")


@case(*TWO)
def string_formatting(x):
    n = x.shape[0]
    label = f"rows={n:03d} {'x'!r} {3.14159:.2f}"
    other = "n=%d" % n + "{}".format(n) + " ".join(["a", "b"])
    return x + len(label), label, other


@case(*TWO)
def map_filter(x):
    ys = list(map(lambda t: t * 2, [x, x + 1]))
    odd = list(filter(lambda i: i % 2, range(5)))
    return ys, odd


@case(*TWO)
def sorted_min_max_keys(x):
    vals = sorted([3, 1, 2], reverse=True)
    return x * vals[0], max([1, 5, 2]), min((4, 2))


@case(*TWO)
def iter_next(x):
    it = iter([x, x * 2, x * 3])
    a = next(it)
    b = next(it)
    return a + b, next(iter([]), 9)


@case(*TWO)
def callable_check(x):
    f = lambda t: t + 1  # noqa: E731
    return f(x) if callable(f) else x


@case(*TWO)
def slice_builtin(x):
    s = slice(1, None)
    return x[s], x[slice(None, 2)]


# ---- functions, closures, lambdas ----------------------------------------------------------
def helper(x, scale=2.0, *, shift=0.0):
    return x * scale + shift


@case(*TWO)
def call_helper_defaults(x):
    return helper(x), helper(x, 3.0), helper(x, shift=1.0), helper(scale=0.5, x=x)


def varargs_helper(*args, **kwargs):
    total = 0
    for a in args:
        total = total + a
    for k in sorted(kwargs):
        total = total + kwargs[k]
    return total


@case(*TWO)
def star_args_kwargs(x):
    args = (x, x * 2)
    kwargs = {"b": x + 1}
    return varargs_helper(*args, **kwargs), varargs_helper(x, a=1, c=x)


@case(*TWO)
def closure_cells(x):
    k = 3

    def inner(y):
        return y * k

    def make_adder(n):
        return lambda t: t + n

    add2 = make_adder(2)
    return inner(x) + add2(x)


@case(*TWO)
def closure_nonlocal(x):
    count = 0

    def bump():
        nonlocal count
        count += 1
        return count

    bump()
    bump()
    return x * count


@case(*TWO)
def lambda_sorted_key(x):
    pairs = [(2, "b"), (1, "a")]
    pairs = sorted(pairs, key=lambda p: p[0]) if False else pairs
    f = lambda a, b=2: a * b  # noqa: E731
    return f(x), f(x, b=3), pairs


@case(*TWO)
def partial_calls(x):
    p = functools.partial(helper, scale=4.0)
    q = functools.partial(torch.add, alpha=2)
    return p(x), q(x, x)


GLOBAL_SCALE = 1.5
GLOBAL_TENSOR = torch.randn(4)


@case(*TWO)
def read_globals(x):
    return x * GLOBAL_SCALE + GLOBAL_TENSOR


@case(*TWO)
def recursive_inline(x):
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)
    return x * fact(4)


def deep3(x):
    return x.sin()


def deep2(x):
    return deep3(x) + 1


def deep1(x):
    return deep2(x) * 2


@case(*TWO, graphs=2)
def deep_inlining(x):
    return deep1(x)


def breaks_inside(x):
    y = x + 1
    print("inside helper")
    return y * 2


@case(*TWO)
def graph_break_in_callee(x):
    a = x * 3
    b = breaks_inside(a)
    return b - 1


# ---- dataclasses, namedtuples ----------------------------------------------------------------
Point = collections.namedtuple("Point", ["x", "y"])


@dataclasses.dataclass
class Config:
    scale: float
    bias: torch.Tensor


@case((Point(r(3), r(3)),), (Point(r(4), r(4)),))
def namedtuple_in(p):
    return p.x * p.y + p[0]


@case(*TWO)
def namedtuple_out(x):
    return Point(x, x * 2), Point(y=1, x=x)._asdict()


@case((Config(2.0, r(3)), r(3)), (Config(3.0, r(3)), r(3)), graphs=2)
def dataclass_in(cfg, x):
    return x * cfg.scale + cfg.bias


@case(*TWO)
def dataclass_out(x):
    c = Config(scale=2.0, bias=x)
    return Config(c.scale * 2, c.bias + 1)


class Counter:
    def __init__(self):
        self.calls = 0

    def step(self, x):
        self.calls += 1
        return x + self.calls


@case(*TWO)
def user_object_method(x):
    c = Counter()
    c.step(x)
    return c.step(x), c.calls


# ---- grad modes ----------------------------------------------------------------------------------
@case((r(3, requires_grad=True),), (r(4, requires_grad=True),))
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    z = x * 3
    return y, z, y.requires_grad, z.requires_grad


@case((r(3, requires_grad=True),), (r(4, requires_grad=True),))
def enable_grad_inside_no_grad(x):
    with torch.no_grad():
        with torch.enable_grad():
            y = x * 2
        z = x + 1
    return y, z, torch.is_grad_enabled()


@case((r(3, requires_grad=True),), (r(4, requires_grad=True),))
def set_grad_enabled_ctx(x):
    with torch.set_grad_enabled(False):
        y = x.exp()
    return y, x.sin()


@case((r(3, requires_grad=True),), (r(4),))
def requires_grad_guard(x):
    return x * 2, x.requires_grad


@pytest.mark.parametrize("fn, input_sets, graphs, fallback_ok, breaks", CASES)
def test_case(fn, input_sets, graphs, fallback_ok, breaks):
    check(fn, *input_sets, graphs=graphs, fallback_ok=fallback_ok, breaks=breaks)


