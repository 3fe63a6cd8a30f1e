"""A family that needs a library this install lacks: importing it fails, as a real one would."""

import importlib

importlib.import_module("a_library_this_install_lacks")
