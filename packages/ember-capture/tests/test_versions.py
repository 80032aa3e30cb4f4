"""The opcode tables against the running interpreter (Note [One handler per version])."""
import dis
import inspect
import pathlib
import sys

import pytest
import torch.nn.modules

from ember_capture import frame
from ember_capture import tracer  # noqa: F401  (fills the tables)

# Instructions the tracer deliberately has no handler for: each one stops a capture with a
# reason (class bodies, star imports, async code, pattern matching, instrumentation).
NOT_TRACED = {
    "LOAD_NAME", "STORE_NAME", "DELETE_NAME", "LOAD_LOCALS", "LOAD_FROM_DICT_OR_GLOBALS",
    "LOAD_FROM_DICT_OR_DEREF", "DELETE_GLOBAL", "DELETE_ATTR", "DELETE_DEREF", "DELETE_SUBSCR",
    "GET_AITER", "GET_ANEXT", "END_ASYNC_FOR", "BEFORE_ASYNC_WITH", "ASYNC_GEN_WRAP",
    "MATCH_CLASS", "MATCH_KEYS", "MATCH_MAPPING", "MATCH_SEQUENCE", "GET_LEN", "CLEANUP_THROW",
    "CALL_INTRINSIC_2", "INTERPRETER_EXIT", "ENTER_EXECUTOR", "EXIT_INIT_CHECK", "RESERVED",
    "LOAD_SPECIAL", "PRINT_EXPR", "SETUP_ANNOTATIONS", "IMPORT_STAR", "GET_AWAITABLE",
    "LOAD_BUILD_CLASS", "WITH_EXCEPT_START", "BINARY_SUBSCR_GETITEM",
}


def _code_objects(code):
    yield code
    for const in code.co_consts:
        if inspect.iscode(const):
            yield from _code_objects(const)


def _emitted(paths):
    names = set()
    for path in paths:
        code = compile(path.read_text(), str(path), "exec")
        for c in _code_objects(code):
            names.update(i.opname for i in dis.get_instructions(c))
    return names


@pytest.mark.skipif(frame.VERSION not in frame.HANDLERS, reason="capture does not support this Python")
def test_every_instruction_emitted_for_tests_and_torch_nn_has_a_handler():
    tests = sorted(pathlib.Path(__file__).parent.glob("*.py"))
    nn = sorted(pathlib.Path(torch.nn.modules.__file__).parent.glob("*.py"))
    missing = _emitted(tests + nn) - set(frame.HANDLERS[frame.VERSION]) - NOT_TRACED
    missing = {n for n in missing if not n.startswith("INSTRUMENTED_")}
    assert not missing, f"no handler on {sys.version_info[:2]} for {sorted(missing)}"


def test_a_second_handler_for_the_same_opcode_and_version_is_refused():
    version = frame.SUPPORTED_VERSIONS[0]
    with pytest.raises(AssertionError, match="two handlers for NOP"):
        frame.op("NOP", versions=(version,))(lambda fr, inst: None)
    assert frame.HANDLERS[version]["NOP"].__name__ == "_nop"


def test_since_and_until_split_the_supported_versions():
    assert set(frame.since((3, 12))) | set(frame.until((3, 11))) == set(frame.SUPPORTED_VERSIONS)
    assert not set(frame.since((3, 12))) & set(frame.until((3, 11)))
