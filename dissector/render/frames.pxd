# Augmenting declarations for Cython (see amqp/scan.pxd): compiling frames.py with this file
# beside it makes SummaryLines an extension type and the detail tree's helpers C functions
# with typed locals.  The .py stays plain Python and is the module that runs when nothing is
# compiled.
import cython

cdef dict _SUMMARY_FIELDS, _KIND_LAYER, _LEAF_TYPES, _DESC_TEXTS, _DEEP_LAYOUTS, _AMQP_TITLES, _TYPE_LINES
cdef list _COMPOSITE_LAYOUTS
cdef dict CHOICES
cdef tuple _PADS, _INT_TEXTS
cdef frozenset _PLAIN_INTS

from amqp_dissect.amqp.framing cimport Frame, Delivery
from amqp_dissect.amqp.codec cimport Composite, Reader, int_at, uint_at

@cython.locals(out=list)
cpdef str frame_summary(ev)

cdef _summary_into(list out, Frame fr)

cdef class _SummaryField:
    cdef public Py_ssize_t index
    cdef public str name_eq
    cdef public object spec
    cdef public bint plain, star

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, sep=str, fields=tuple, sf=_SummaryField)
cdef _fields_into(list out, str pname, values)

cdef class SummaryLines:
    cdef public object t0, time_text
    cdef public str errors
    cdef public list chunk
    cdef public object begin
    cdef object _packet, _ts
    cdef str _head
    cdef dict _peers
    cdef bytes _lead
    cdef object _lead_head, _lead_peers

    @cython.locals(peers=str, out=list, fr=Frame)
    cpdef line(self, ev)

    @cython.locals(peers=str, out=list, fr=Frame, text=str)
    cpdef add_utf8(self, list chunk, ev)

    cpdef add_line(self, ev)

    @cython.locals(peers=str, key=tuple)
    cdef str _head_peers(self, Frame fr)

cdef _notes_into(list out, notes)

cdef str _rel(ns)

cdef class _CompositeLayout:
    cdef public object spec
    cdef public Py_ssize_t nf
    cdef public tuple fields, names, ctypes, defaults, nulls, heads

@cython.locals(pad=str, tname=str, text=str)
cdef _value_into(list out, label, v, Py_ssize_t indent, f, bint default, ctype)

@cython.locals(i=Py_ssize_t)
cdef _container_into(list out, str pad, label, v, Py_ssize_t indent, str mark)

@cython.locals(key=str)
cdef _map_into(list out, str pad, label, v, Py_ssize_t indent)

@cython.locals(text=str)
cdef _scalar_into(list out, str pad, label, v, f, bint default, ctype, str mark)

cdef str _leaf_text(v, t)

@cython.locals(layout=_CompositeLayout, values=list, n=Py_ssize_t, i=Py_ssize_t, nf=Py_ssize_t, j=Py_ssize_t,
               ctypes=tuple, head=str, d=str, heads=dict)
cdef _composite_into(list out, Composite c, Py_ssize_t indent)

@cython.locals(hit=_CompositeLayout, layout=_CompositeLayout, table=dict)
cdef _CompositeLayout _composite_layout(spec, Py_ssize_t indent)

@cython.locals(text=str)
cpdef str _desc_text(d)

@cython.locals(head=str, type_line=str)
cdef tuple _frame_head_tail(Frame fr)

cpdef frame_detail_into(list out, ev)

@cython.locals(head_tail=tuple, dl=Delivery, pname=object)
cdef _frame_tree_into(list out, Frame fr)

@cython.locals(mark=Py_ssize_t, c=Composite)
cdef _performative_into(list out, Frame fr)

@cython.locals(walk=_TreeWalk, cap=Py_ssize_t, mark=Py_ssize_t, sections=list)
cdef _sections_into(list out, Delivery dl)

@cython.locals(c=Composite)
cdef _section_into(list out, s)

# the tree from the encoding
cdef int _W_OTHER, _W_NULL, _W_TRUE, _W_FALSE, _W_BOOL, _W_ZERO, _W_UNSIGNED, _W_SIGNED, _W_BINARY, _W_STRING
cdef int _W_SYMBOL, _W_LIST, _W_MAP, _W_TIMESTAMP
cdef bytes _W_KIND, _W_WIDTH
cdef tuple _W_CLASS, _W_TNAME, _W_COMPOSITES, _W_NAMES, _W_TITLES, _W_INNER, _W_PERFORMATIVES, _W_SECTIONS
cdef list _W_LAYOUTS
cdef Py_ssize_t _WALK_DEPTH

@cython.locals(plain=bint, i=Py_ssize_t, b=int, s=str, buf=cython.p_uchar)
cdef str _quoted(bytes data, Py_ssize_t p, Py_ssize_t n, bint symbol, Py_ssize_t limit)

cdef class _TreeWalk:
    cdef bytes data
    cdef Py_ssize_t p, lim, elements, cap, depth, inner
    cdef list out

    @cython.locals(data=bytes, code=int)
    cdef int performative(self) except -1

    @cython.locals(data=bytes, p=Py_ssize_t, code=int)
    cdef int sections(self) except -1

    @cython.locals(r=Reader)
    cdef int _decoded_section(self) except -1

    @cython.locals(data=bytes, p=Py_ssize_t, lim=Py_ssize_t, size=Py_ssize_t, end=Py_ssize_t, count=Py_ssize_t)
    cdef Py_ssize_t _header(self, int code) except -2

    @cython.locals(data=bytes, code=int, count=Py_ssize_t, layout=_CompositeLayout, nf=Py_ssize_t, end=Py_ssize_t,
                   saved=Py_ssize_t, out=list, ctypes=tuple, i=Py_ssize_t, heads=dict, head=str, text=str, d=str)
    cdef int composite(self, int dcode, Py_ssize_t indent) except -1

    @cython.locals(data=bytes, code=int, kind=int, text=str, pad=str, p=Py_ssize_t, dcode=int)
    cdef int value(self, label, Py_ssize_t indent, f, ctype) except -1

    @cython.locals(r=Reader)
    cdef int _decoded(self, label, Py_ssize_t indent, f, ctype) except -1

    @cython.locals(kind=int, data=bytes, p=Py_ssize_t, lim=Py_ssize_t, width=int, u=cython.ulonglong,
                   s=cython.longlong, n=Py_ssize_t, b=int)
    cdef str _leaf(self, int code)

    @cython.locals(p=Py_ssize_t, ms=cython.longlong, pad=str)
    cdef int _timestamp(self, label, Py_ssize_t indent) except -1

    @cython.locals(data=bytes, start=Py_ssize_t, code=int, elements=Py_ssize_t, count=Py_ssize_t, end=Py_ssize_t,
                   out=list, mark=Py_ssize_t, saved=Py_ssize_t, kcode=int, kind=int, width=int, p=Py_ssize_t,
                   n=Py_ssize_t, key=str, pad=str)
    cdef int _map(self, label, Py_ssize_t indent) except -1

cdef dict _JSON_LAYOUTS
cdef tuple _IMMUTABLE

@cython.locals(hit=tuple, choices=tuple, defaults=list)
cdef tuple _json_layout(spec)

@cython.locals(fields=tuple, choices=tuple, out=dict, values=list, n=Py_ssize_t, nf=Py_ssize_t, i=Py_ssize_t)
cdef dict _fields_json(c)

@cython.locals(defaults=tuple, out=dict, values=list, n=Py_ssize_t, i=Py_ssize_t, computed=bint)
cdef dict _defaults_json(c)

@cython.locals(d=dict)
cdef _json(v)

@cython.locals(out=dict)
cpdef dict message_json(sections)

@cython.locals(d=dict)
cdef dict _frame_json(Frame ev)

cdef _delivery_json_into(dict d, Frame ev, Delivery dl)

cdef dict _header_json(ev)

cdef dict _note_json(ev)
cdef dict _event_head(ev)

cdef class DetailLines:
    cdef object _last_packet
    cdef public object layer_records
    cdef public list internal_errors
    cdef public bint only_amqp

    cpdef add(self, list out, record, ev)
