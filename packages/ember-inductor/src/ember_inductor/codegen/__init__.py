"""Code generation backends; the shared interface is `codegen.common` (see Note [Kernel description])."""
