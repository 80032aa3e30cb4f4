"""Every ```python block in docs/ and in each package README runs, so the docs stay true.

A page's blocks run in order in one namespace (a later block may use an earlier one's names).
Blocks fenced as ```text (or anything but python) are not run.
"""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted(ROOT.glob("docs/*.md")) + sorted(ROOT.glob("packages/*/README.md")) + [ROOT / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page: pathlib.Path):
    return BLOCK.findall(page.read_text()) if page.exists() else []


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": f"docs_example_{page.stem}"}
    for i, block in enumerate(python_blocks(page)):
        code = compile(block, f"{page.relative_to(ROOT)}[block {i}]", "exec")
        exec(code, namespace)  # noqa: S102 - running our own documentation is the point
