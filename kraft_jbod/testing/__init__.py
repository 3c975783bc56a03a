"""Test support shipped with the package: what the pytest plugin's fixtures run on.

Nothing here is imported by ``import kraft_jbod`` or by loading the pytest plugin; a
fixture imports its module when a test first uses it.
"""
