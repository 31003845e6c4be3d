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

The cost of an entry is its compile: Cython writes 8,000 to 70,000 lines of C per module, and gcc
takes about 0.37 s of CPU per 1,000 lines at Python's own -O3, 0.19 s at -O1 (amqp/framing.c: 26.3 s
and 12.7 s); the compile is most of a fresh install's time.  Only a module that no other compiled
module cimports can be left out (the cdef classes and C functions of a module with a ``.pxd`` are
reached through it at C level).  Left out, measured under callgrind (report, frames, frames -V on
the benchmark's captures): amqp.message, model.transitions, model.stalls, model.steps and
results.percentiles (about 100,000 lines of C).  None does per-frame work: as Python they cost
the commands their import only (a pure module that imports Cython's shadow module, where Cython
is installed, pays 27 million instructions for it: percentiles takes the shim instead).  Kept
though they could go: model.store (its CompactStore.append runs per delivery; with store and rows
left out too, report ran 1.1% more instructions beyond the import), results.rows (a row per
delivery in the tables), shard (per packet under -j, which callgrind does not count), and
results.analytics and render.frames (1.5% and 5.7% of report's and frames' instructions run in
their compiled code).

The level: FULLY_OPTIMIZED are the modules where a command runs at least 1% of its instructions
in their compiled code; they are built at HOT_LEVEL, -O2.  At -O1 a module's own code runs 7 to 21%
more instructions (framing 21%, tcp 7%), which is at most a tenth of a percent of a command for each
of the others, and halves their compile.  -O2 instead of Python's own -O3 for the 16: 11 to 19% less
gcc CPU per module, paired on a busy machine (framing 17.7 -> 14.3 s, dissect 18.1 -> 15.0 s,
netparse 25.3 -> 22.4 s), the 16 together about 180 s at -O2; and `report` on the acked benchmark
capture's first 15,000 packets ran 1,257.4 M instructions against 1,256.9 M at -O3 (+0.04%, cachegrind),
the same output.  Not adopted: COLD_LEVEL -O0 (the 19 in 32 s of gcc instead of 68 s, but `report`
ran 1,615.9 M instructions, +29%: their code is cold only next to the 16's), and gcc flags that
do not change the code (-pipe, -w, -fno-semantic-interposition, -fno-plt: within the noise, 3.4 to
4.0 s for amqp/values.c at -O1 either way).
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
    "amqp_dissect.dissect",
    "amqp_dissect.shard",
    "amqp_dissect.model.serial",
    "amqp_dissect.model.machine",
    "amqp_dissect.model.delivery",
    "amqp_dissect.model.deliveries",
    "amqp_dissect.model.store",
    "amqp_dissect.model.stats",
    "amqp_dissect.model.state",
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
    "amqp_dissect.model.connection",
    "amqp_dissect.results.diagnoses",
)

# Modules compiled at HOT_LEVEL; the others at COLD_LEVEL.  See above.
FULLY_OPTIMIZED = (
    "amqp_dissect.capture.netparse",
    "amqp_dissect.capture.tcp",
    "amqp_dissect.amqp.codec",
    "amqp_dissect.amqp.scan",
    "amqp_dissect.amqp.framing",
    "amqp_dissect.dissect",
    "amqp_dissect.model.machine",
    "amqp_dissect.model.delivery",
    "amqp_dissect.model.deliveries",
    "amqp_dissect.model.stats",
    "amqp_dissect.results.analytics",
    "amqp_dissect.render.frames",
    "amqp_dissect.model.settlement",
    "amqp_dissect.model.transfers",
    "amqp_dissect.model.tracker",
    "amqp_dissect.model.connection",
)
HOT_LEVEL = "-O2"
COLD_LEVEL = "-O1"
