from ember_prims.__about__ import __version__
