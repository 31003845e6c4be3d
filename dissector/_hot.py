"""The hot modules: compiled by Cython when the package is built, plain Python otherwise.

This list is the one place that names them.  ``setup.py`` reads it (without importing
the package) to build one extension module per entry, and ``dissector/__init__.py`` (``amqp_dissect``)
uses it to report what is compiled and to load the ``.py`` twins instead when
``AMQP_DISSECT_PURE_PYTHON=1`` is set.  Entries are dotted import names; setup.py finds
each source file through pyproject.toml's ``[tool.setuptools.package-dir]`` mapping
(without one, ``dissector.codec`` is ``dissector/codec.py``; with
``amqp_dissect = "dissector"``, ``amqp_dissect.amqp.codec`` is
``dissector/amqp/codec.py``).  When a module moves or the import name changes,
update its entry here: nothing else lists them.

Keep this file free of imports: it is executed on its own by the build.

The cost of an entry is its compile (the whole build: about 1.25 million lines of C from Cython,
most of a fresh install's time).  Only a module that no other compiled module cimports can be
left out: the cdef classes and C functions of a module with a ``.pxd`` are reached through it at
C level.  Those are the six without a ``.pxd`` (amqp.message, model.transitions, model.store,
model.stalls, results.rows, model.steps) and four whose ``.pxd`` nobody cimports (shard,
results.percentiles, results.analytics, render.frames): together about 280,000 of the lines.
None is left out yet: leaving one out needs the benchmark's ratio with and without it.
"""

HOT_MODULES = (
    "amqp_dissect.events",
    "amqp_dissect.capture.pcap",
    "amqp_dissect.capture.netparse",
    "amqp_dissect.capture.tcp",
    "amqp_dissect.amqp.codec",
    "amqp_dissect.amqp.values",
    "amqp_dissect.amqp.scan",
    "amqp_dissect.amqp.framing",
    "amqp_dissect.amqp.message",
    "amqp_dissect.dissect",
    "amqp_dissect.shard",
    "amqp_dissect.model.serial",
    "amqp_dissect.model.transitions",
    "amqp_dissect.model.machine",
    "amqp_dissect.model.delivery",
    "amqp_dissect.model.deliveries",
    "amqp_dissect.model.store",
    "amqp_dissect.model.stats",
    "amqp_dissect.model.stalls",
    "amqp_dissect.model.state",
    "amqp_dissect.results.percentiles",
    "amqp_dissect.results.analytics",
    "amqp_dissect.results.rows",
    "amqp_dissect.render.frames",
    "amqp_dissect.model.loss",
    "amqp_dissect.model.credit",
    "amqp_dissect.model.window",
    "amqp_dissect.model.entities",
    "amqp_dissect.model.findings",
    "amqp_dissect.model.stall_rules",
    "amqp_dissect.model.transactions",
    "amqp_dissect.model.sessions",
    "amqp_dissect.model.settlement",
    "amqp_dissect.model.links",
    "amqp_dissect.model.transfers",
    "amqp_dissect.model.tracker",
    "amqp_dissect.model.hooks",
    "amqp_dissect.model.steps",
    "amqp_dissect.model.connection",
    "amqp_dissect.results.diagnoses",
)
