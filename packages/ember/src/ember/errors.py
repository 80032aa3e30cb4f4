"""The errors the facade raises. Each names what was wrong and what is valid."""


class EmberError(Exception):
    """Base class of every error ember raises on purpose."""


class InvalidArgument(EmberError, ValueError):
    """An argument to `ember.compile` and friends is not one ember accepts."""


class BackendUnavailable(EmberError, RuntimeError):
    """A named backend exists but cannot run here (its layer is missing or a tool is absent)."""


class BackendCompilerFailed(EmberError, RuntimeError):
    """A backend raised while compiling a captured graph (raised under fullgraph=True)."""


class UsageError(EmberError, RuntimeError):
    """The program used a compiled result against its rules (an output of a CUDA graph kept,
    through a view, across the next call): raised as it is, never a fallback."""


class SpecError(EmberError, ValueError):
    """A graph broke the spec of a boundary between layers (raised with EMBER_CHECK=1 or
    options={"check": True}). `layer` names the verifier ("capture", "autograd", "prims",
    "inductor"); the layer's own error (each layer has a `SpecError` of its own, since layers do
    not import each other) is its `__cause__`. `ember.checks.LAYER_SPEC_ERRORS` lists them."""

    def __init__(self, message: str, layer: str = "") -> None:
        super().__init__(message)
        self.layer = layer
