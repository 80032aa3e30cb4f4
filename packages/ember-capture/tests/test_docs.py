"""The ```python blocks of this package's README and docs/capture.md run (in order, one namespace)."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
PAGES = [ROOT / "packages" / "ember-capture" / "README.md", ROOT / "docs" / "capture.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda p: p.name)
def test_page_examples_run(page):
    blocks = BLOCK.findall(page.read_text())
    assert blocks, f"{page} has no runnable example"
    namespace = {"__name__": f"capture_docs_{page.stem}"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{page.name}[block {i}]", "exec"), namespace)  # noqa: S102
