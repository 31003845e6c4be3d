"""A stand-in for the ``cython`` module when Cython is not installed at run time.

The hot modules (see :mod:`dissector._hot`) are plain Python that Cython compiles in
its "pure Python mode".  A hot module that wants Cython typing imports it as::

    try:
        import cython
    except ImportError:
        from . import _cython_shim as cython   # from .. import ... in a sub-package

and types with ``@cython.locals(i=cython.Py_ssize_t)`` or ``cython.declare`` (or a
``.pxd`` beside the module): setup.py turns Cython's annotation typing off, so type
hints, ``x: cython.int`` included, stay hints.  When compiled, Cython resolves
``cython.*`` at compile time and this module is never used.  When run as Python,
``cython`` is Cython's own shadow module if Cython is installed, else this shim: just
enough of the same names, all without effect.  Add a name here before using it in a
hot module.
"""

compiled = False

# C types used in annotations and cython.locals(): Python's own types stand in.
int = long = longlong = short = char = Py_ssize_t = size_t = bint = int
uint = ulong = ulonglong = ushort = uchar = int
double = float = float


def _identity(func):
    return func


def _decorator_factory(*args, **kwargs):
    return _identity


# Decorators: cython.cfunc, cython.ccall, cython.inline, cython.final, ... and the
# directive decorators that take arguments (cython.locals(x=cython.int), ...).
cfunc = ccall = inline = final = cclass = _identity
locals = returns = exceptval = boundscheck = wraparound = cdivision = _decorator_factory


def declare(type_=None, value=None, **kwargs):
    """``x = cython.declare(cython.int, 0)`` is ``x = 0`` in Python."""
    return value


def cast(type_, value, **kwargs):
    return value
