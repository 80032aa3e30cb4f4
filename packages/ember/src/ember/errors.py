"""The errors the facade raises. Each names what was wrong and what is valid."""


class EmberError(Exception):
    """Base class of every error ember raises on purpose."""


class InvalidArgument(EmberError, ValueError):
    """An argument to `ember.compile` and friends is not one ember accepts."""


class BackendUnavailable(EmberError, RuntimeError):
    """A named backend exists but cannot run here (its layer is missing or a tool is absent)."""


class BackendCompilerFailed(EmberError, RuntimeError):
    """A backend raised while compiling a captured graph (raised under fullgraph=True)."""
