"""Typed views of the generated tables in :mod:`amqp_dissect.amqp._spec`.

Nothing here restates a table: it only wraps the generated tuples in small
classes with name lookups.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import _spec


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    type: str  # declared type ("handle", "*", "symbol" ...)
    primitive: str  # the primitive it is encoded as ("*" = any)
    requires: str | None
    mandatory: bool
    multiple: bool
    has_default: bool
    default: object  # wire value of the default (e.g. 2 for snd-settle-mode "mixed")


@dataclass(frozen=True, slots=True)
class CompositeSpec:
    name: str
    source: str
    provides: tuple[str, ...]
    section: str
    descriptor_symbol: str
    descriptor_code: int
    fields: tuple[FieldSpec, ...]
    index: dict = field(compare=False, repr=False)

    @property
    def descriptor_text(self) -> str:
        return f"0x{self.descriptor_code >> 32:08x}:0x{self.descriptor_code & 0xFFFFFFFF:08x}"


@dataclass(frozen=True, slots=True)
class RestrictedSpec:
    name: str
    source: str
    primitive: str
    provides: tuple[str, ...]
    section: str
    descriptor_symbol: str | None
    descriptor_code: int | None
    choices: dict  # wire value -> choice name


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
