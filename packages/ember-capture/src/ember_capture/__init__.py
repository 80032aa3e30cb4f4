from ember_capture.__about__ import __version__
