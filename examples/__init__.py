"""The examples shipped with sampan, one job folder per subpackage; installed as the
package ``sampan_examples`` (pyproject.toml maps it onto this folder).

Each is registered under the ``sampan.examples`` entry point group (pyproject.toml), so
``sampan drill --example NAME`` finds it in a source checkout and in an installed wheel.
"""
