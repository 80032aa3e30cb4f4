"""The import DAG between ember's packages, and the parts of torch product code may not use.

ARCHITECTURE.md: ember_symbolic (symbolic sizes) is the bottom layer and imports no other ember
package; ember_capture, ember_autograd and ember_prims may import ember_symbolic only;
ember_inductor may import ember_prims and ember_symbolic; the facade imports all. Product code never imports
torch's own compiler stack (we write it) and never calls torch.compile.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ["ember", "ember_capture", "ember_autograd", "ember_prims", "ember_inductor", "ember_symbolic"]
ALLOWED = {
    "ember_symbolic": set(),
    "ember_capture": {"ember_symbolic"},
    "ember_autograd": {"ember_symbolic"},
    "ember_prims": {"ember_symbolic"},
    "ember_inductor": {"ember_prims", "ember_symbolic"},
    "ember": {"ember_capture", "ember_autograd", "ember_prims", "ember_inductor", "ember_symbolic"},
}
FORBIDDEN_MODULES = (
    "torch._dynamo", "torch._inductor", "torch._functorch", "torch._decomp", "torch._refs",
    "torch._prims", "torch.export", "torch.fx.experimental.proxy_tensor",
    "torch.fx.experimental.symbolic_shapes", "torch.func.functionalize",
)


def product_files(pkg: str):
    src = ROOT / "packages" / pkg.replace("_", "-") / "src" / pkg
    return sorted(src.rglob("*.py"))


def imported_modules(path: pathlib.Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:  # `from torch import _dynamo`
                yield node.lineno, f"{node.module}.{alias.name}"


def attribute_chains(path: pathlib.Path):
    """Dotted names used in the code (`torch._dynamo.reset`, `torch.compile`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            parts, cur = [], node
            while isinstance(cur, ast.Attribute):
                parts.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name):
                parts.append(cur.id)
                yield node.lineno, ".".join(reversed(parts))


@pytest.mark.parametrize("pkg", PACKAGES)
def test_import_dag(pkg):
    files = product_files(pkg)
    assert files, f"no sources found for {pkg}"
    bad = []
    for path in files:
        for lineno, mod in imported_modules(path):
            top = mod.split(".")[0]
            if top in PACKAGES and top != pkg and top not in ALLOWED[pkg]:
                bad.append(f"{path.relative_to(ROOT)}:{lineno} imports {mod}")
    assert not bad, f"{pkg} may import only {sorted(ALLOWED[pkg]) or 'no other ember package'}:\n" + "\n".join(bad)


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_torch_compiler_internals(pkg):
    bad = []
    for path in product_files(pkg):
        names = list(imported_modules(path)) + list(attribute_chains(path))
        for lineno, name in names:
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN_MODULES) or name == "torch.compile":
                bad.append(f"{path.relative_to(ROOT)}:{lineno} uses {name}")
    assert not bad, "product code uses parts of torch that ember writes itself:\n" + "\n".join(sorted(set(bad)))
