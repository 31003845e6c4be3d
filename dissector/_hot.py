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

The level: FULLY_OPTIMIZED are built at HOT_LEVEL (-O2), the others at COLD_LEVEL (-O1), which
halves or better their compile.  Chosen module by module (issue 41's install round) from two figures:
what -O1 costs each command, and what it saves the compile.
- The cost: callgrind on `report`, `frames` (the batched benchmark capture's first 1,500 packets) and
  `frames -V` (the flood capture's first 3,000), with all 16 modules of the former -O2 set built at
  -O2 and then at -O1, the instructions of each module's own .so compared (what a module's code
  runs at -O1 is its own: the modules call each other through Python's C API).  Per frame: less
  the 970 M instructions of a run on a one-packet capture (the start: imports, tables).  All 16 at
  -O1: report +2.27% of its instructions (+6.97% per frame), frames +1.67% (+5.1%), frames -V
  +1.05% (+2.1%).  Per module, per frame, report / frames / frames -V (its own code's extra):
  framing 1.41 / 2.71 / 0.76% (+22%), transfers 1.32 / 0 / 0 (+17%), render.frames
  0 / 1.59 / 0.99 (+7 to 13%), delivery 0.80 (+18%), connection 0.73 (+18%), scan
  0.64 / 0.66 / 0.21 (+9%), settlement 0.42, deliveries 0.41, tracker 0.33, machine 0.32 / 0.05 /
  0.02, analytics 0.30 / 0 / 0 (+9%), stats 0.21 / 0 / 0 (+7%), dissect 0.15 / 0.16 / 0.02 (+7 to
  22%), tcp 0.04 / 0.04 / 0.04 (+7%), codec 0.01 (+7%), netparse 0.00 / 0.00 / 0.01 (+0.7%).  On
  the acked shape (its first 15,000 packets, report) tcp, dissect and netparse run more of the
  command (1.3%, 0.7%, 0.65% of it): with their own code's extras above, the six below together
  come to about 0.9% per frame there (estimated, not run at -O1).
- The saving, gcc's CPU at -O2 and -O1 (seconds, one module at a time, at load 7 to 12, so
  inflated alike): netparse 25.8 / 10.7, codec 12.3 / 5.2, dissect 17.8 / 9.4, tcp 17.4 / 10.6,
  analytics 16.3 / 10.1, stats 9.4 / 4.6 (together 98.9 / 50.6: 48 s less); the ten kept at -O2:
  framing 20.8 / 13.2, render.frames 19.8 / 11.1, deliveries 13.3 / 5.9, scan 11.8 / 6.3,
  connection 11.3 / 6.0, machine 8.0 / 5.1, settlement 6.4 / 4.2, tracker 5.1 / 3.2, transfers
  5.1 / 4.1, delivery (24,000 lines) about 4 / 3.
So -O1 for the six whose -O1 costs every command least per second of compile saved (netparse,
codec, tcp, dissect, analytics, stats: at most 0.7% of report's per-frame instructions on the
batched capture, 0.2% of frames', under 0.1% of frames -V's, and about 0.9% on the acked shape), -O2 for
the ten where one more would pass issue 41's 1% (machine would make report's 1.0%; framing alone is
1.4% of report and 2.7% of frames).  Moving all 16 would save about 90 s of gcc's CPU for 2 to 7%
more instructions per frame.
- Not adopted: -O1 with -finline-small-functions -foptimize-sibling-calls for the 16 (the -O2
  passes one would expect to matter to Cython's small helper functions): 0 to 25% more compile than
  -O1 (framing 13.1 s, dissect 11.9 s, analytics 12.8 s) and report +6.73% instructions per frame
  against -O2, -O1's +6.97%: it keeps almost nothing of -O2's speed.
Earlier (the round before): -O2 instead of Python's own -O3: 11 to 19% less gcc CPU per module,
the same output and +0.04% instructions.  Not adopted: COLD_LEVEL -O0 (the 19 in 32 s of gcc
instead of 68 s, but `report` ran +29% instructions: their code is cold only next to the hot
ones'), and gcc flags for the compile's time (-pipe, -w, -fno-semantic-interposition,
-fno-plt: within the noise; -fno-plt was adopted later for the code it makes, see setup.py).  gcc's time at -O1 is spread over its passes (connection.c: parsing
24%, the per-function optimisation and expansion 63%, no other pass above 12%): no flag removes
a large share.

Measured next and not adopted yet (on a machine at load 8 to 16, so gcc's CPU times are minima of
3 runs and the firm figures are cc1's instruction counts under callgrind, preprocessed C at -O1):
- Cython 3.3's shared utility module (cythonize's ``shared_utility_qualified_name``, one extension
  module, say ``amqp_dissect._cyutility``, holding the function type, argument parsing, raising,
  importing and type set-up that each module now compiles for itself): model/serial.c 10,114 ->
  8,054 lines and 2,368 -> 1,698 M cc1 instructions (-28%, about 0.27 s of gcc); in the large
  modules the same fixed part is a smaller share: amqp/framing.c 72,138 -> 69,015 lines (-O2: 15.5
  s before, 15.7 s after, within the noise), model/entities.c 57,980 -> 55,032 (-O1: 4.67 s, 4.64 s).
  The shared module itself is 30,747 lines of C, compiled once: 7,751 M cc1 instructions at -O1
  (about 3 s).  For the 35: about 35 x 0.27 = 9.5 s of gcc CPU (a little more where a module uses
  more of the shared code), less those 3 s, i.e. some 6 to 8 s, 3% of the compile; its price is one module every compiled one imports (setup.py would have to send all of
  them to Python when it fails) and calls into it through pointers, whose instruction cost in
  `report` was not measured.  Not worth it alone; worth it together with a cut of the -O2 set.
- Directives, on top of the shared module: binding=False (serial 7,372 lines, 1,475 M cc1
  instructions, 13% fewer again, about 0.09 s; entities 53,768 lines; but def functions then are
  builtin functions without __defaults__ or a signature, a behaviour change for every compiled def),
  emit_code_comments=False (comments only: serial with both, 7,153 lines and 1,474.5 M instructions
  against 1,474.7 M: nothing for gcc), optimize.unpack_method_calls=False (-143 lines in entities).
- Where the compile goes, per gcc pass (-ftime-report, framing.c at -O2): spread over the passes,
  none above 5% (parsing 14%, the per-function optimisation and expansion 74%); by kind of code
  (framing / entities): def bodies 31% / 32%, utility code 21% / 13%, argument-parsing wrappers
  12% / 12%, cdef functions 10% / 6%, the pickling that the archive's checkpoint needs 6% / 12%,
  module init 3% / 2%.  No one directive removes a large share: the lever left is the level, the
  16 modules at -O2 being about 180 of the 250 s, each halved at -O1 for 7 to 21% more
  instructions in its own code.

The fourth round (issue 41; C lines from `cython` on each module alone, gcc's time per 1,000 lines
as above; the machine at load 10 to 19 all along, so no gcc timing or cache simulation was taken):
- auto_pickle=False (no generated __reduce_cython__/__setstate_cython__) shrinks a module's C only
  where it has cdef classes with picklable fields: entities 58,309 -> 50,213 lines (-13.9%),
  events 31,144 -> 24,238 (-22%), render.frames 65,441 -> 60,518 (-7.5%), pcap 48,915 -> 45,054
  (-7.9%), framing 72,138 -> 67,336 (-6.7%), shard 21,524 -> 20,345, connection 37,707 -> 36,475;
  netparse and rows not at all.  The archive's checkpoint pickles the flows' state: its files
  name classes of codec, framing, scan, tcp, dissect, connection, credit, deliveries, delivery,
  entities, findings, links, machine, sessions, settlement, stall_rules, stats, transactions,
  transfers, window, analytics and diagnoses, so those keep it.  What is left, render.frames
  (made and used in the CLI's process; -j forks), pcap, shard and events (whose CaptureRecord
  the archive's stage 2 makes; that it is never pickled is not checked), is about 17,000 lines,
  some 3 to 4 s of gcc's CPU, under 2 s of the install's wall time: not done.
- binding=False: framing 72,138 -> 70,896 lines (-1.7%), entities -4.5%, connection -5.3%,
  render.frames -3.3%: about 3% of the compile, some 6 s of CPU.  Module-level def functions
  and cdef classes' methods become builtins (no inspect.signature, no __defaults__, no
  attributes set on them); a def in a Python class stays a Cython function (checked).  A change
  of behaviour to audit against every user first: not done.  The audit, fifth round: a module
  compiled with binding=False (a test module, not the project's) gives builtins that pickle by
  name (so a Spark executor's shipped reference still resolves), raise ValueError from
  inspect.signature, have no __defaults__, and do not bind as methods when put in a class (the
  pure twin's function does: compiled and pure would differ there).  An ast scan of dissector/,
  pipelines/ and cli/ finds no class that takes one of the hot modules' 387 module-level defs as
  an attribute; the tests' inspect.signature calls are on the pipelines' functions (not
  compiled).  Left for a round that can rebuild and check every output (the machine was at load
  15 to 23 throughout this one).
- The install around the compile (install.sh; docs/performance.md, the install): the build's
  requirements go into the venv (made without ensurepip's pip and old setuptools), the compile
  runs in place on both cores while pip installs the project and its dependencies beside it.

The fifth round (issue 41): gcc's -Os, measured and not adopted (docs/performance.md, "gcc -Os,
measured").  Each module's .c compiled by hand with setuptools' command line and `-g0 -Os` (or
-O2, -O1) last, the two levels of a module one after the other, on a machine at load 15 to 23
(other sessions' builds and benchmarks), so gcc's seconds (user + sys) are inflated, but alike
within a pair.  -Os against -O2, the ten at HOT_LEVEL: framing 15.5 / 25.4 s, render.frames
14.4 / 21.1, deliveries 8.7 / 14.0, scan 9.0 / 12.9, connection 7.5 / 11.4, machine 6.4 / 9.3,
settlement 5.3 / 8.1, tracker 4.6 / 6.2, transfers 4.8 / 6.3, delivery 3.2 / 4.5 (the ten 83.4 /
129.2 s).  -Os is about 35% less compile than -O2 but 5 to 15% more than -O1 (netparse 15.2 /
14.2 s, tcp 14.4 / 12.5 and 12.7, dissect 13.1 and 13.7 / 12.4, -Os / -O1), and its machine code
40% smaller (framing's .text 410 -> 245 KB, render.frames 373 -> 221 KB, transfers 118 -> 73
KB).  The price, the ten at -Os in a copy of the tree (the other 25 as built, -O1), CPU time
(user + sys) of the whole benchmark capture, five pairs alternated with the -O2 build in the
same minutes: `report` on the batched capture 0.83 -> 1.24 s (median; each pair +33 to +57%),
`frames` on the flood capture 1.09 -> 1.24 s (+1 to +31% per pair).  At -Os gcc keeps out of
line Cython's small static helpers that -O2 inlines (framing's .so: 63 more of them as functions
of their own, among them __Pyx_PyObject_Call, __Pyx_PyObject_CallOneArg, __Pyx_PyList_Append,
__Pyx_GetItemInt_List_Fast, the comparisons with C ints, the module globals' dict-version
checks), a call each on the per-frame path, and the I-cache misses do not fall: callgrind
--cache-sim=yes on the batched capture's first 1,500 packets, whole runs -O2 -> -Os, report
1,451.0 -> 1,519.6 M Ir (+14% beyond the start's ~970 M), I1mr 23.04 -> 25.10 M, Ir + 10 I1mr +
100 LLmr +5.3%; frames 1,450.2 -> 1,486.4 M Ir (+7.5%), I1mr 20.97 M both, +2.2%; frames -V
(the flood capture's first 3,000) 1,389.8 -> 1,446.0 M Ir (+13%), I1mr 31.33 -> 30.93 M, +3.0%.
So -Os costs `report` far more than the 1% issue 41 allows, for the ten modules together 46 s of
gcc's CPU at that load (some 25 s on an idle machine): no module moved, nor any -O1 one.

The sixth round (issue 41; docs/performance.md, "The sixth round"; the machine at load 7 to 18
throughout, so CPU figures only, in pairs, and instruction counts):
- NOT_PICKLED, adopted: events, capture.pcap, shard and render.frames are built with
  auto_pickle=False (setup.py sets it per module; their code is untouched).  C lines 31,144 ->
  24,238, 48,915 -> 45,054, 21,524 -> 20,345, 65,441 -> 60,518 (-16,869); gcc's CPU (user + sys,
  each .c by hand with setuptools' command line at the module's level, two alternated pairs):
  events 3.68 / 4.31 -> 2.27 / 2.36 s, pcap 10.02 / 8.61 -> 8.69 / 7.84, shard 3.29 / 2.39 ->
  3.02 / 2.37, render.frames (-O2) 17.99 / 18.19 -> 16.98 / 15.53: the four 35.0 / 33.5 -> 31.0 /
  28.1 s, 4.0 to 5.4 s less.  The audit is a test (tests/cli/test_archive_not_pickled.py): a real
  checkpoint's pickles name no class of theirs, and a guard in every process of two `archive`
  runs (the driver and Spark's workers) refuses and records any pickling of their objects.
- The shared utility module (cythonize's shared_utility_qualified_name, amqp_dissect._cyutility),
  measured and not adopted yet: the 35 modules' C 1,226,183 -> 1,139,728 lines with the shared
  module's 30,747 (-7.1%); its own compile 2.3 s of gcc CPU at -O1, 3.6 s at -O2, and Cython
  generates it in one worker (25 s of wall at load 9 to 18).  Instructions (callgrind,
  PYTHONHASHSEED=0, the batched capture's first 1,500 packets), the shared module at -O2:
  report 888.99 -> 890.59 M (+0.18%; the start, a one-packet capture, 384.17 -> 385.36 M, so
  +0.08% per frame), frames 845.98 -> 848.22 M (+0.26%); at -O1 it costs +0.40% and +0.43% (its
  __Pyx_PyObject_FastCallDict and Py_DECREF out of line).  So within the ~0.3% at -O2; left for
  the next round because adopting it needs the fallback (the shared module failing sends every
  compiled module to Python), a CC=false fresh clone and a fresh clone's timing, which this
  round's load did not leave time for.
- The schedule (build/schedule.log, written by setup.py: each module's Cython, gcc and end, per
  worker): on a fresh clone the two workers ended 9.1 s apart in a compile of 824.6 s at load 9 to
  10 (0.5% of it), and the same modules in the best longest-first order (by their measured times)
  would end at 825.3 s against 824.2 s: the order has nothing left to give.  Starting the
  dependencies' pip beside the build's requirements (the core idle before the compile) was
  measured on install.sh with the compile skipped, alternated: 20.7 and 20.6 s wall, 11.9 and
  11.8 s CPU before; 23.3 and 21.1 s wall, 12.7 and 13.9 s CPU with it (the base Python's pip
  --python starts an interpreter more): not adopted.
- Whole fresh-clone installs at load 1 to 4, alternated: 002671d 182.0, 181.8 and 195.1 s of CPU
  (94.7 s wall at load 2), this round's b358dce 203.6, 185.9 and 185.3 s: noise larger than the 4
  to 5 s above.

The eighth round (issue 41; docs/performance.md, "The eighth round: the shared utility module"; the
machine at load 8 to 16 throughout, so CPU pairs, C lines and instruction counts):
- The shared utility module, adopted: SHARED_UTILITY below, built by setup.py first, at
  SHARED_LEVEL (-O2), without Cython's typed-memoryview code (SHARED_EXCLUDED_FEATURES: 9,473 lines
  of C instead of 30,747; gcc 1.05 s at -O2 instead of 4.16 s), model.stats (the one module with
  typed memoryviews) translated without it (NOT_SHARED; with it, stats 2.29 s of gcc and the
  shared module's memoryview part 3.1 s more: 6.45 s against 5.75 s).  The 35 modules' C
  1,209,293 -> 1,115,007 lines (+9,473 shared, -7.0%).  gcc's CPU before / after, each module's
  .c by hand at its level, alternated, load 11 to 16: framing 23.08 / 22.06 s, connection 10.92 /
  9.17, tcp 10.78 / 9.83, entities 6.84 / 5.85, credit 1.89 / 1.43, serial 0.71 / 0.59, hooks
  0.82 / 0.56 (the seven 55.04 / 49.49 s: -10% for -7% of their lines), the shared module 1.16
  s: over the 84,813 lines, about 24 s less at that load, some 15 s idle (~7% of the compile).
  Instructions (callgrind, the batched capture's first 1,500 packets and its first packet):
  report 830.61 -> 832.46 M (+0.22%; the start 376.70 -> 377.82 M, so +0.16% per frame), frames
  840.55 -> 838.65 M (-0.23%), the same bytes out.
  If the shared module fails (Cython or gcc), no compiled module is kept: every hot module stays
  Python, and the workers stop translating (`CC=false bash install.sh` on a fresh clone: 17.9 s
  user at load 13 to 15, the fourth round's 58.0 s).
- The rest of the 10%: no other change fits ~0.3% per frame (the ten -O2 modules each cost 0.32%
  or more at -O1; the five modules no other cimports cost more as Python, or, shard, run only
  under -j); Cython's translation (28 to 32 s of wall over the two workers) cannot be skipped on a
  fresh clone; the workers end within a second of each other.
- The 17% swing between two fresh clones (113.9 and 132.4 s): all in the compile (the workers'
  span 106.0 -> 124.7 s; gcc's wall per module 0.74x to 1.53x, Cython's +13%), not pip nor the
  schedule; build/schedule.log now has each module's CPU (cpu=) beside its wall time to tell the
  machine's slow mode from other processes on the cores.
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
    "amqp_dissect.amqp.scan",
    "amqp_dissect.amqp.framing",
    "amqp_dissect.model.machine",
    "amqp_dissect.model.delivery",
    "amqp_dissect.model.deliveries",
    "amqp_dissect.render.frames",
    "amqp_dissect.model.settlement",
    "amqp_dissect.model.transfers",
    "amqp_dissect.model.tracker",
    "amqp_dissect.model.connection",
)
# Modules compiled without Cython's generated pickling of their cdef classes (auto_pickle=False):
# nothing pickles their objects.  See above.
NOT_PICKLED = (
    "amqp_dissect.events",
    "amqp_dissect.capture.pcap",
    "amqp_dissect.shard",
    "amqp_dissect.render.frames",
)
HOT_LEVEL = "-O2"
COLD_LEVEL = "-O1"
# Cython's shared utility module (cythonize's shared_utility_qualified_name): one more extension
# module, generated by Cython (no .py twin, not a hot module: not counted among them), holding the
# utility code (function type, argument parsing, raising, importing, type set-up) that every
# compiled module would otherwise compile for itself; they import it.  Built at SHARED_LEVEL, without
# Cython's typed-memoryview code (SHARED_EXCLUDED_FEATURES), so the hot modules that use typed
# memoryviews (NOT_SHARED) are translated without it and keep their own copy.  If it does not build,
# every hot module stays Python.  See above ("The eighth round").
SHARED_UTILITY = "amqp_dissect._cyutility"
SHARED_LEVEL = "-O2"
SHARED_EXCLUDED_FEATURES = ("MemoryView",)
NOT_SHARED = (
    "amqp_dissect.model.stats",
)
