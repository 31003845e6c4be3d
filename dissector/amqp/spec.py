"""Typed views of the generated tables in :mod:`amqp_dissect.amqp._spec`.

Nothing here restates a table: it only wraps the generated tuples in small
classes with name lookups.
"""

from __future__ import annotations

from . import _spec


class _Frozen:
    """A read-only record with the behaviour of a ``@dataclass(frozen=True, slots=True)``: fields in
    ``__slots__`` order, positional or keyword arguments, equality and hash over the fields but
    ``_uncompared``, the same repr.  (A dataclass runs generated code through ``exec`` when its class
    is made: a cost at every start, before any packet.)"""

    __slots__ = ()
    _uncompared: tuple = ()

    def __init__(self, *args, **kwargs):
        names = self.__slots__
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes {len(names)} arguments, {len(args)} given")
        values = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in values:
                raise TypeError(f"{type(self).__name__}() got an unexpected or repeated argument {k!r}")
            values[k] = v
        missing = [n for n in names if n not in values]
        if missing:
            raise TypeError(f"{type(self).__name__}() missing arguments: {', '.join(missing)}")
        for n in names:
            object.__setattr__(self, n, values[n])

    def _key(self) -> tuple:
        return tuple(getattr(self, n) for n in self.__slots__ if n not in self._uncompared)

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field {name!r}")

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__ if n not in self._uncompared)
        return f"{type(self).__name__}({shown})"


class FieldSpec(_Frozen):
    """One field of a composite type: name, declared type ("handle", "*", "symbol" ...), the primitive
    it is encoded as ("*" = any), requires, mandatory, multiple, whether it has a default and the
    default's wire value (e.g. 2 for snd-settle-mode "mixed")."""

    __slots__ = ("name", "type", "primitive", "requires", "mandatory", "multiple", "has_default", "default")


class CompositeSpec(_Frozen):
    """A composite type: name, source, provides, section, descriptor symbol and code, its fields and
    ``index`` (field name -> position; not compared, not shown)."""

    __slots__ = ("name", "source", "provides", "section", "descriptor_symbol", "descriptor_code", "fields",
                 "index")
    _uncompared = ("index",)

    @property
    def descriptor_text(self) -> str:
        return f"0x{self.descriptor_code >> 32:08x}:0x{self.descriptor_code & 0xFFFFFFFF:08x}"


class RestrictedSpec(_Frozen):
    """A restricted type: name, source, primitive, provides, section, descriptor symbol and code (None
    when it has none) and ``choices`` (wire value -> choice name)."""

    __slots__ = ("name", "source", "primitive", "provides", "section", "descriptor_symbol", "descriptor_code",
                 "choices")


def _composite(entry) -> CompositeSpec:
    name, source, provides, section, dsym, dcode, fields = entry
    fspecs = tuple(FieldSpec(*f) for f in fields)
    return CompositeSpec(
        name, source, provides, section, dsym, dcode, fspecs, {f.name: i for i, f in enumerate(fspecs)}
    )


def _restricted(entry) -> RestrictedSpec:
    name, source, primitive, provides, section, dsym, dcode, choices = entry
    return RestrictedSpec(name, source, primitive, provides, section, dsym, dcode, dict(choices))


COMPOSITES: dict[str, CompositeSpec] = {n: _composite(e) for n, e in _spec.COMPOSITES.items()}
RESTRICTED: dict[str, RestrictedSpec] = {n: _restricted(e) for n, e in _spec.RESTRICTED.items()}

# descriptor (int code or symbol str) -> CompositeSpec | RestrictedSpec
BY_DESCRIPTOR: dict = {}
for _code, _name in _spec.DESCRIPTORS.items():
    BY_DESCRIPTOR[_code] = COMPOSITES.get(_name) or RESTRICTED[_name]
for _sym, _name in _spec.SYMBOLIC_DESCRIPTORS.items():
    BY_DESCRIPTOR[_sym] = COMPOSITES.get(_name) or RESTRICTED[_name]

PROVIDERS: dict[str, tuple[str, ...]] = _spec.PROVIDERS
# the terminal delivery states, in the spec's order: every composite that provides "outcome"
OUTCOMES: tuple[str, ...] = PROVIDERS["outcome"]
DEFINITIONS: dict[str, str] = _spec.DEFINITIONS

PERFORMATIVES = tuple(n for n, c in COMPOSITES.items() if "frame" in c.provides)
SASL_FRAMES = tuple(n for n, c in COMPOSITES.items() if "sasl-frame" in c.provides)
SECTIONS = tuple(
    n for table in (COMPOSITES, RESTRICTED) for n, c in table.items() if "section" in c.provides
)

MIN_MAX_FRAME_SIZE = int(DEFINITIONS["MIN-MAX-FRAME-SIZE"])
AMQP_PORT = int(DEFINITIONS["PORT"])
AMQPS_PORT = int(DEFINITIONS["SECURE-PORT"])


def _choices_of(type_name: str) -> dict | None:
    """The choices of a restricted type, following its source chain (None if it has none)."""
    seen = set()
    while type_name in RESTRICTED and type_name not in seen:
        seen.add(type_name)
        r = RESTRICTED[type_name]
        if r.choices:
            return r.choices
        type_name = r.source
    return None


# type name -> {wire value: choice name}, for every restricted type with choices
CHOICES: dict[str, dict] = {n: c for n in RESTRICTED if (c := _choices_of(n))}
# bool and int compare equal in Python (True == 1): remember which choice sets are boolean
_BOOL_CHOICES = {n: all(type(v) is bool for v in c) for n, c in CHOICES.items()}


def choice_name(type_name: str, value) -> str | None:
    """The spec's name for ``value`` of restricted type ``type_name`` (None if not a choice)."""
    choices = CHOICES.get(type_name)
    if choices is None or (type(value) is bool) != _BOOL_CHOICES[type_name]:
        return None
    try:
        return choices.get(value)
    except TypeError:
        return None


def descriptor_name(descriptor) -> str | None:
    spec = BY_DESCRIPTOR.get(descriptor)
    return spec.name if spec is not None else None
