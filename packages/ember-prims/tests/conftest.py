"""ember-prims tests. torch's OpInfo database (torch.testing._internal) imports `expecttest`, a
test-only package that the workspace environment may lack; a stand-in with the two names torch
uses (TestCase, ACCEPT) lets the OpInfo samples load without it. Install `expecttest` for the
real one."""
import sys
import types
import unittest

try:
    import expecttest  # noqa: F401
except ImportError:
    _stub = types.ModuleType("expecttest")
    _stub.TestCase = unittest.TestCase
    _stub.ACCEPT = False
    sys.modules["expecttest"] = _stub
