"""The hot modules: compiled by Cython when the package is built, plain Python otherwise.

This list is the one place that names them.  ``setup.py`` reads it (without importing
the package) to build one extension module per entry, and ``dissector/__init__.py``
uses it to report what is compiled and to load the ``.py`` twins instead when
``AMQP_DISSECT_PURE_PYTHON=1`` is set.  Entries are dotted module names; the source
file is the name with dots turned into slashes plus ``.py`` (``dissector.codec`` is
``dissector/codec.py``).  When a module moves, update its entry here.

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
