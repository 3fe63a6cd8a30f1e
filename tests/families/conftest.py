"""Fixtures of the family tests: the test distributions installed as a user installs a family, and
a models folder holding two families' tiny kits, live in `tests/family_dists.py` (the ComfyUI API's
tests use them too) and are offered by `tests/conftest.py`."""
