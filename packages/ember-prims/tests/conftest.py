"""ember-prims tests. torch's OpInfo database (torch.testing._internal) imports `expecttest`, a
test-only package that the workspace environment may lack; a stand-in with the two names torch
uses (TestCase, ACCEPT) lets the OpInfo samples load without it. Install `expecttest` for the
real one."""
import pathlib
import sys
import types
import unittest

# pytest runs with --import-mode=importlib: make this folder's helper module importable by name
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

try:
    import expecttest  # noqa: F401
except ImportError:
    _stub = types.ModuleType("expecttest")
    _stub.TestCase = unittest.TestCase
    _stub.ACCEPT = False
    sys.modules["expecttest"] = _stub
