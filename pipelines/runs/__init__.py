"""Runs over capture files on this machine: one process (:mod:`.local`: files → Dissector →
Analyzer), ``-j N`` worker processes (:mod:`.parallel`), and the messages and requests tables of
a capture source (:mod:`.messages`, :mod:`.requests`)."""
