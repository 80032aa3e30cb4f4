"""ember.settings: compile()'s arguments validated into one frozen Settings; the environment is
read there and nowhere else."""
import dataclasses

import pytest

from ember.errors import InvalidArgument
from ember.settings import CAPTURE_LOGS, INDUCTOR_LOGS, LOG_NAMES, MODES, make_settings


def settings(env=None, **kwargs):
    args = dict(backend_name="inductor", fullgraph=False, dynamic=None, mode=None, options=None)
    args.update(kwargs)
    return make_settings(env={} if env is None else env, **args)


def test_defaults():
    s = settings()
    assert (s.fullgraph, s.dynamic, s.mode, dict(s.options), s.logs) == (False, None, None, {}, frozenset())
    assert (s.check, s.raise_internal, s.debug) == (False, False, False)
    assert s.cache_dir.endswith("ember")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.fullgraph = True


@pytest.mark.parametrize("mode", [m for m in MODES if m])
def test_mode_is_a_named_set_of_options(mode):
    assert dict(settings(mode=mode).options) == MODES[mode]


@pytest.mark.parametrize("kwargs,message", [
    (dict(mode="fastest"), "unknown mode 'fastest'"),
    (dict(mode=3), "mode=3"),
    (dict(fullgraph=1), "fullgraph=1"),
    (dict(dynamic="x"), "dynamic='x'"),
    (dict(options=[1]), "options="),
    (dict(options={1: True}), "option keys must be strings"),
    (dict(mode="default", options={}), "either mode or options"),
    (dict(options={"check": "yes"}), r"options\['check'\]='yes'"),
])
def test_invalid_arguments_name_the_valid_choices(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        settings(**kwargs)


def test_logs_from_environment():
    assert settings(env={"EMBER_LOGS": "graph_breaks, output_code"}).logs == {"graph_breaks", "output_code"}
    assert settings(env={"EMBER_LOGS": "all"}).logs == LOG_NAMES - {"all"}
    with pytest.raises(InvalidArgument, match="bogus"):
        settings(env={"EMBER_LOGS": "bogus"})


@pytest.mark.parametrize("torch_logs,ember_logs", [
    ("graph_breaks,recompiles,guards", {"graph_breaks", "recompiles", "guards"}),
    ("graph_code", {"graph"}),
    ("aot_graphs", {"aot_graphs"}),
    ("output_code", {"output_code"}),
    ("perf_hints", {"fallback", "cudagraphs"}),
    ("+dynamo,aot", CAPTURE_LOGS | {"aot_graphs"}),
    ("+inductor", INDUCTOR_LOGS),
    ("+ember", LOG_NAMES - {"all"}),
])
def test_logs_accept_torch_logs_names(torch_logs, ember_logs):
    assert settings(env={"EMBER_LOGS": torch_logs}).logs == ember_logs


def test_unknown_log_name_lists_the_valid_ones():
    with pytest.raises(InvalidArgument) as info:
        settings(env={"EMBER_LOGS": "recompiles,graph_cod"})
    message = str(info.value)
    assert "['graph_cod']" in message and "graph_code" in message and "recompiles" in message
    assert "+" in message


def test_cache_dir_from_environment():
    assert settings(env={"EMBER_CACHE_DIR": "/tmp/x"}).cache_dir == "/tmp/x"


@pytest.mark.parametrize("name,var", [("check", "EMBER_CHECK"), ("raise_internal", "EMBER_RAISE_INTERNAL"),
                                      ("debug", "EMBER_DEBUG")])
def test_switches_from_environment_or_options(name, var):
    assert getattr(settings(env={var: "1"}), name) is True
    assert getattr(settings(env={var: "0"}), name) is False
    from_option = settings(options={name: True, "max_fusion_size": 8})
    assert getattr(from_option, name) is True
    assert dict(from_option.options) == {"max_fusion_size": 8}  # the switch is not a backend option
    with pytest.raises(InvalidArgument, match=f"{var}='maybe'"):
        settings(env={var: "maybe"})
