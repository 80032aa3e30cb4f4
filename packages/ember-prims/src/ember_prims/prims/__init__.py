"""The primitive op set, one module per family. Importing this package defines every prim."""
from ember_prims.prims import creation, elementwise, indexing, random, reductions, views  # noqa: F401
