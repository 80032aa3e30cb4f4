"""SizeNodes: size expressions become graph nodes that recompute them on real inputs."""
import operator

import torch
import torch.fx

from ember_symbolic import SizeEnv, SizeNodes, expr_of, fake_with_sizes, plain_fake_mode


def test_size_expressions_become_nodes_that_run_on_new_sizes():
    env = SizeEnv()
    n, m, k = env.symint(8, "x.size(0)"), env.symint(6, "x.size(1)"), env.symint(5, "k")
    x = fake_with_sizes(plain_fake_mode(), torch.empty(8, 6), (n, m))
    g = torch.fx.Graph()
    xp, kp = g.placeholder("x"), g.placeholder("k")
    sizes = SizeNodes(g)
    sizes.bind_input(xp, x)
    sizes.bind_input(kp, k)
    values = [n * m, n * m // 2, n - 2, (n + 1) // 2 * k, torch.sym_max(n, m), n % 3, -(-n // 4),
              n * 2 - m * 3 + k, n / 2, torch.sym_float(n) * 1.5, 7]
    nodes = [sizes.node_of(v) for v in values]
    assert nodes[-1] == 7 and sizes.node_of(n * m) is nodes[0]  # one node per expression
    for node, v in zip(nodes[:-1], values):
        assert expr_of(node.meta["val"]) == expr_of(v)
    g.output(tuple(nodes))
    gm = torch.fx.GraphModule({}, g)
    assert "torch.ops.aten.sym_size.int(x, 0)" in gm.code
    assert any(node.target is operator.mul for node in gm.graph.nodes)
    for N, M, K in [(8, 6, 5), (3, 10, 7), (17, 2, 2)]:
        want = [N * M, N * M // 2, N - 2, (N + 1) // 2 * K, max(N, M), N % 3, -(-N // 4),
                N * 2 - M * 3 + K, N / 2, N * 1.5, 7]
        assert list(gm(torch.empty(N, M), K)) == want
    assert env.guards == []


def test_a_symbol_only_in_a_stride_is_read_from_the_stride():
    env = SizeEnv()
    n = env.symint(8, "n")
    mode = plain_fake_mode()
    with mode:
        x = torch.empty_strided((2, 3), (n, 1))  # x = rows[:, :3] of rows of width n
    g = torch.fx.Graph()
    xp = g.placeholder("x")
    sizes = SizeNodes(g)
    sizes.bind_input(xp, x)
    g.output((sizes.node_of(n * 3),))
    gm = torch.fx.GraphModule({}, g)
    assert "sym_stride" in gm.code
    assert gm(torch.empty(2, 10)[:, :3]) == (30,)


def test_size_nodes_are_recognized():
    from ember_symbolic import SIZE_OPS, is_size_node

    env = SizeEnv()
    n = env.symint(8, "n")
    x = fake_with_sizes(plain_fake_mode(), torch.empty(8), (n,))
    g = torch.fx.Graph()
    sizes = SizeNodes(g)
    sizes.bind_input(g.placeholder("x"), x)
    node = sizes.node_of(n * 2 + 1)
    assert all(m.target in SIZE_OPS for m in g.nodes if m.op == "call_function")
    assert is_size_node(node) and not is_size_node(next(iter(g.nodes)))



def test_a_guard_sympy_cannot_simplify_is_kept_as_it_is():
    # torch's meta kernels asked Ne(Max(1, q), q), q = floor(s0*s1/floor(s0*s1/2)), after a
    # reshape(n // 2, 2): sympy's simplify raised "The argument 'nan' is not comparable"
    import sympy

    env = SizeEnv()
    s0, s1 = env.create_symbol(4, "a"), env.create_symbol(6, "b")
    q = sympy.floor(s0 * s1 / sympy.floor(s0 * s1 / 2))
    env.record(sympy.Ne(sympy.Max(1, q), q), False)
    assert env.guards and env.guards_hold({"s0": 4, "s1": 6})
