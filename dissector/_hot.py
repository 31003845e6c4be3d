"""The hot modules: compiled by Cython when the package is built, plain Python otherwise.

This list is the one place that names them.  ``setup.py`` reads it (without importing
the package) to build one extension module per entry, and ``dissector/__init__.py``
uses it to report what is compiled and to load the ``.py`` twins instead when
``AMQP_DISSECT_PURE_PYTHON=1`` is set.  Entries are dotted import names; setup.py finds
each source file through pyproject.toml's ``[tool.setuptools.package-dir]`` mapping
(without one, ``dissector.codec`` is ``dissector/codec.py``; with
``amqp_dissect = "dissector"``, ``amqp_dissect.amqp.codec`` is
``dissector/amqp/codec.py``).  When a module moves or the import name changes,
update its entry here: nothing else lists them.

Keep this file free of imports: it is executed on its own by the build.
"""

HOT_MODULES = (
    "dissector.codec",
    "dissector.amqp",
    "dissector.tcp",
    "dissector.netparse",
    "dissector.capture",
    "dissector.state",
    "dissector.analytics",
)
