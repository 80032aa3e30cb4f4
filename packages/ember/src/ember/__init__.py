from ember.__about__ import __version__
