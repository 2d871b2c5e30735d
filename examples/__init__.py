"""The examples shipped with sampan, one job folder per subpackage.

Each is registered under the ``sampan.examples`` entry point group (pyproject.toml), so
``sampan drill --example NAME`` finds it in a source checkout and in an installed wheel.
"""
