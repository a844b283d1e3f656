"""A data format for what a learner's sandboxed call leaves behind, that decodes without ever running code.

``encode(value) -> bytes`` and ``decode(data) -> value`` (``encode_observation`` / ``decode_observation`` for a
whole ``Dict[Key, value]``). Decoding uses no pickle, no ``torch.load``, no ``eval``: only ``json`` and raw tensor
bytes, checked against strict caps; whatever the bytes, it returns a value or raises ``WireError``. ``check(data)``
makes the same checks without torch and builds nothing. Importing this module imports no torch.

A message is ``MAGIC``, two big-endian uint64 lengths (the JSON document's, the tensor bytes'), the JSON document
(ASCII), then the tensors' raw bytes back to back. JSON's own values stand for None, bool, int, float (NaN and
infinities as ``NaN``, ``Infinity``) and str; everything else is a tagged object, ``{"t": "tuple", "v": [...]}``.

What is kept: None, bool, int (any size), float, str, tensors (whitelisted dtypes, any shape, any strides, decoded
on the CPU, with ``requires_grad`` and whether they were an ``nn.Parameter``), ``torch.dtype``, ``torch.device``,
``torch.Size``, list, tuple, dict (keys: None, bool, int, float, str, tuples of those), set, frozenset, and
``MISSING``. Only exact types count (``type(x) is list``): a subclass of list is an unknown object, except that
namedtuples and torch's structseqs (``torch.return_types.max``) come back as plain tuples. Any other object, and a
container met again inside itself, is sent as a name and a ``repr`` and comes back as an ``Opaque`` of a class of
that name. Of an unknown object only its type's ``__name__`` and ``__module__`` are read and its ``repr`` is
called (guarded); it is never iterated, compared or asked for attributes.

Caps (``MAX_*`` below), the same on both sides: ``max_bytes`` (256 MiB by default) for the message and, apart, for
the tensors decoding it makes (one tensor sent twice is stored once, but decodes to two); containers nested at most
``MAX_DEPTH`` deep; at most ``MAX_ITEMS`` values; a str of at most ``MAX_STRING`` characters. ``encode`` raises
``WireError`` for a value over a cap (it never sends a part of one), ``decode`` for a message over one.
"""
from __future__ import annotations

import functools
import json
import re
import struct
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

if TYPE_CHECKING:
    import torch

    from helpers.course.exercises.engine.observe import Key

MAGIC = b"HWIRE01\n"
_HEADER = struct.Struct(">QQ")
MAX_BYTES = 256 * 2**20  # a whole message, by default
MAX_DEPTH = 32  # containers inside containers
MAX_ITEMS = 1_000_000  # values in one message, each container element and each tensor counting one
MAX_STRING = 2**20  # characters of one str (and hex digits of one big int)
MAX_NAME = 80  # characters of an unknown type's name (and module)
MAX_REPR = 200  # characters of an unknown object's repr
MAX_NDIM = 64
MAX_OPAQUE_TYPES = 1024  # names of unknown types in one message that no earlier message had
# The dtypes a tensor may have on the wire: bytes per element, and whether it may require grad (floating or
# complex). Written out, so that ``check`` needs no torch; a test compares them with torch's own.
TENSOR_DTYPE_BYTES = {"float16": 2, "float32": 4, "float64": 8, "bfloat16": 2, "complex64": 8, "complex128": 16,
                      "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "bool": 1}
TENSOR_DTYPES = tuple(TENSOR_DTYPE_BYTES)
GRADIENT_DTYPES = ("float16", "float32", "float64", "bfloat16", "complex64", "complex128")
_DTYPE_NAME = re.compile(r"[a-z][a-z0-9_]{0,79}")
_SMALL_INT = 2**63  # ints of at most this size are JSON ints; larger ones are hex strings
_FIELDS = {
    "list": ("v",), "tuple": ("v",), "set": ("v",), "frozenset": ("v",), "dict": ("v",), "size": ("v",),
    "int": ("x",), "dtype": ("v",), "device": ("type", "index"), "missing": (),
    "tensor": ("dtype", "shape", "offset", "length", "requires_grad", "parameter"),
    "opaque": ("module", "name", "repr"),
}
_HEX = re.compile(r"-?0x[0-9a-f]+")
_DEVICE_TYPE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
_OPAQUE_TYPES: Dict[Tuple[str, str], type] = {}  # decoded classes by (module, name), so that equal names share one
_MAX_REMEMBERED_TYPES = 4096


class WireError(ValueError):
    """A value that cannot be sent (over a cap), or bytes that are not a well-formed message."""


class Opaque:
    """The base of decoded unknown objects: it shows the recorded ``repr`` and equals only itself."""

    __slots__ = ("_repr",)

    def __init__(self, text: str) -> None:
        self._repr = text

    def __repr__(self) -> str:
        return self._repr

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    __hash__ = object.__hash__


@functools.lru_cache(maxsize=None)
def _dtypes() -> Dict[str, "torch.dtype"]:
    """Every dtype torch names (``float32``, ``float8_e4m3fn``, ...), by name."""
    import torch

    return {str(value).removeprefix("torch."): value for value in vars(torch).values()
            if isinstance(value, torch.dtype)}


class _Unbuilt:
    """What ``check`` walks past where ``decode`` would build a torch value (a tensor, a dtype, a device, a size)
    or ``MISSING``: like them, no dict key or set element may be one."""

    __slots__ = ()


def _type_attribute(cls: type, name: str) -> str:
    """``cls.__name__`` or ``cls.__module__``, read past any metaclass property, as printable text (never raises)."""
    try:
        value = type.__dict__[name].__get__(cls, type)
    except Exception:
        return "object" if name == "__name__" else "?"
    if type(value) is not str:
        return "object" if name == "__name__" else "?"
    return "".join(ch for ch in value if ch.isprintable())[:MAX_NAME] or "?"


def _guarded_repr(value: Any) -> str:
    try:
        text = repr(value)
        if type(text) is not str:
            raise TypeError("repr returned no str")
    except Exception as error:  # a learner's __repr__ may raise anything
        return f"<{_type_attribute(type(value), '__name__')} object (its repr raised "\
               f"{_type_attribute(type(error), '__name__')})>"
    return text if len(text) <= MAX_REPR else text[:MAX_REPR - 3] + "..."


def _is_tuple_like(value: Any) -> bool:
    """A namedtuple or a structseq: a direct subclass of tuple with ``_fields`` or ``n_fields``, plain metaclass."""
    cls = type(value)
    if type(cls) is not type or cls.__mro__ != (cls, tuple, object):
        return False
    return "_fields" in cls.__dict__ or "n_fields" in cls.__dict__


def _plain_key(value: Any, depth: int = 0) -> bool:
    """A dict key or set element the format keeps: None, bool, int, float, str, or a tuple of those."""
    cls = type(value)  # compared with ``is`` only: a learner's metaclass may define == and hash
    if value is None or cls is bool or cls is int or cls is float or cls is str:
        return True
    if cls is tuple or _is_tuple_like(value):
        return depth < MAX_DEPTH and all(_plain_key(item, depth + 1) for item in tuple.__iter__(value))
    return False


def _container_tag(value: Any) -> Optional[str]:
    """The tag of an exact list, tuple (or tuple-like), set or frozenset; None for anything else."""
    cls = type(value)
    if cls is list:
        return "list"
    if cls is tuple or _is_tuple_like(value):
        return "tuple"
    if cls is set:
        return "set"
    if cls is frozenset:
        return "frozenset"
    return None


class _Encoder:
    def __init__(self, max_bytes: int) -> None:
        # No value is a torch object (or MISSING) unless its module is loaded: so none is imported here (the
        # grader's runner encodes its own failures, and loads no torch).
        self.torch = sys.modules.get("torch")
        observe = sys.modules.get("helpers.course.exercises.engine.observe")
        self.missing = getattr(observe, "MISSING", None) if observe is not None else None
        self.max_bytes = max_bytes
        self.items = 0
        self.chunks: List[bytes] = []
        self.blob_size = 0
        self.size = 0  # at least the message's bytes so far (each value's text, each tensor's bytes where it is used)
        self.tensors: Dict[int, Tuple[int, int]] = {}  # id(tensor) -> (offset, length): one tensor's bytes once
        self.open: Dict[int, None] = {}  # ids of the containers being encoded (a cycle meets one again)

    def value(self, value: Any, depth: int) -> Any:
        self.items += 1
        if self.items > MAX_ITEMS:
            raise WireError(f"more than {MAX_ITEMS} values")
        self.grow(1)
        cls = type(value)  # compared with ``is`` only: a learner's metaclass may define == and hash
        if value is None or cls is bool or cls is float:
            return value
        if cls is int:
            return value if -_SMALL_INT <= value <= _SMALL_INT else self.big_int(value)
        if cls is str:
            if len(value) > MAX_STRING:
                raise WireError(f"a str of more than {MAX_STRING} characters")
            self.grow(len(value))
            return value
        if self.missing is not None and value is self.missing:
            return {"t": "missing"}
        if self.torch is not None:
            found = self.torch_value(value, depth)
            if found is not None:
                return found
        tag = _container_tag(value)
        if tag is None and cls is not dict:
            return self.opaque(value)
        if id(value) in self.open:
            return self.opaque(value, f"<a {tag or 'dict'} that contains itself>")
        if depth >= MAX_DEPTH:
            raise WireError(f"containers nested more than {MAX_DEPTH} deep")
        if tag in ("set", "frozenset") and not all(_plain_key(item) for item in value):
            return self.opaque(value)
        if tag is None and not all(_plain_key(key) for key in value):
            return self.opaque(value)
        self.open[id(value)] = None
        try:
            if tag is None:
                return {"t": "dict", "v": [[self.value(key, depth + 1), self.value(item, depth + 1)]
                                           for key, item in list(value.items())]}
            items = list(tuple.__iter__(value)) if tag == "tuple" else list(value)
            return {"t": tag, "v": [self.value(item, depth + 1) for item in items]}
        finally:
            del self.open[id(value)]

    def torch_value(self, value: Any, depth: int) -> Optional[Any]:
        """A tensor's, dtype's, device's or size's record; None for any other value."""
        torch, cls = self.torch, type(value)
        if cls is torch.Tensor or cls is torch.nn.Parameter:
            return self.tensor(value)
        if cls is torch.dtype:
            return {"t": "dtype", "v": str(value).removeprefix("torch.")}
        if cls is torch.device:
            return {"t": "device", "type": value.type, "index": value.index}
        if cls is torch.Size:
            return {"t": "size", "v": [self.value(int(size), depth + 1) for size in value]}
        return None

    def grow(self, size: int) -> None:
        self.size += size
        if self.size > self.max_bytes:
            raise WireError(f"a message of more than {self.max_bytes} bytes")

    def big_int(self, value: int) -> Dict[str, Any]:
        text = hex(value)
        if len(text) > MAX_STRING:
            raise WireError(f"an int of more than {MAX_STRING} hex digits")
        self.grow(len(text))
        return {"t": "int", "x": text}

    def opaque(self, value: Any, text: Optional[str] = None) -> Dict[str, Any]:
        cls = type(value)
        record = {"t": "opaque", "module": _type_attribute(cls, "__module__"), "name": _type_attribute(cls, "__name__"),
                  "repr": _guarded_repr(value) if text is None else text}
        self.grow(len(record["module"]) + len(record["name"]) + len(record["repr"]))
        return record

    def tensor(self, value: "torch.Tensor") -> Any:
        torch = self.torch
        # Every method through the class, never the tensor: an instance attribute (``t.detach = ...``) must not
        # choose the bytes that are sent. ``Tensor.detach`` gives a plain tensor with no such attribute.
        requires_grad = bool(torch.Tensor.requires_grad.__get__(value))
        plain = torch.Tensor.detach(value)
        dtype = str(plain.dtype).removeprefix("torch.")
        if (dtype not in TENSOR_DTYPES or plain.layout != torch.strided or plain.is_nested or plain.is_meta
                or plain.dim() > MAX_NDIM):
            return self.opaque(value)
        length = plain.numel() * plain.element_size()
        self.grow(length)  # where it is used again too: decoding makes one tensor of each use
        if id(value) not in self.tensors:
            flat = plain.cpu().resolve_conj().resolve_neg().contiguous().reshape(-1)
            self.chunks.append(flat.view(torch.uint8).numpy().tobytes())
            self.tensors[id(value)] = (self.blob_size, length)
            self.blob_size += length
        offset, length = self.tensors[id(value)]
        return {"t": "tensor", "dtype": dtype, "shape": list(plain.shape), "offset": offset, "length": length,
                "requires_grad": requires_grad, "parameter": type(value) is torch.nn.Parameter}


def encode(value: Any, max_bytes: int = MAX_BYTES) -> bytes:
    """``value`` as a message ``decode`` reads back.

    Raises:
        WireError: when the message, or the tensors decoding it makes, would be over ``max_bytes``, or ``value``
            holds more than ``MAX_ITEMS`` values, containers nested deeper than ``MAX_DEPTH``, or a str longer than
            ``MAX_STRING``.
    """
    encoder = _Encoder(max_bytes)
    document = json.dumps(encoder.value(value, 0), allow_nan=True, separators=(",", ":"), check_circular=False)
    text = document.encode("ascii")
    size = len(MAGIC) + _HEADER.size + len(text) + encoder.blob_size
    if size > max_bytes:
        raise WireError(f"a message of {size} bytes, over the cap of {max_bytes}")
    return b"".join([MAGIC, _HEADER.pack(len(text), encoder.blob_size), text, *encoder.chunks])


def _object(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    result: Dict[str, Any] = {}
    for key, item in pairs:
        if key in result:
            raise WireError(f"the key {key[:40]!r} twice in one JSON object")
        result[key] = item
    return result


def _json_int(text: str) -> int:
    if len(text) > 20:
        raise WireError("a JSON int of more than 20 characters")
    return int(text)


def _json_constant(text: str) -> float:
    if text not in _CONSTANTS:
        raise WireError(f"the JSON constant {text!r}")
    return _CONSTANTS[text]


def _require(condition: bool, problem: str) -> None:
    if not condition:
        raise WireError(problem)


def _count(value: Any, low: int = 0, high: int = 2**63 - 1) -> int:
    _require(type(value) is int and low <= value <= high, f"{value!r} where an int in [{low}, {high}] belongs")
    return value


def _allocatable(shape: List[int]) -> bool:
    """Whether torch can make an empty tensor of ``shape`` (compared with ``torch.empty`` on zero-element shapes,
    torch 2.4 to 2.15): its contiguous strides fit in int64, and the product of its sizes, taken in order, never
    overflows 64 bits on the way (a zero met later does not save it)."""
    stride = 1
    for size in reversed(shape[1:]):
        stride *= max(size, 1)
        if stride > 2**63 - 1:
            return False
    product = 1
    for size in shape:
        product *= size
        if product > 2**64 - 1:
            return False
    return True


def _text(value: Any, limit: int) -> str:
    _require(type(value) is str and len(value) <= limit, f"no str of at most {limit} characters: {type(value)}")
    return value


class _Decoder:
    """Reads a message's JSON document and tensor bytes, importing torch only for a torch value. With
    ``build=False`` it checks the same things without torch, and stands an ``_Unbuilt`` where a torch value,
    ``MISSING`` or an unknown object would be."""

    def __init__(self, blob: memoryview, max_bytes: int, build: bool = True) -> None:
        self.blob = blob
        self.max_bytes = max_bytes
        self.build = build
        self.tensor_bytes = 0  # of every tensor made: one region of the blob may be used many times
        self.opaque_types: Dict[Tuple[str, str], type] = {}
        self.items = 0
        self.readers: Dict[str, Callable[[Dict[str, Any], int], Any]] = {
            "list": self.list, "tuple": self.tuple, "set": self.set, "frozenset": self.set, "dict": self.dict,
            "size": self.size, "int": self.big_int, "dtype": self.dtype, "device": self.device,
            "missing": self.missing, "tensor": self.tensor, "opaque": self.opaque}

    def missing(self, record: Dict[str, Any], depth: int) -> Any:
        if not self.build:
            return _Unbuilt()
        from helpers.course.exercises.engine.observe import MISSING

        return MISSING

    def value(self, value: Any, depth: int) -> Any:
        self.items += 1
        _require(self.items <= MAX_ITEMS, f"more than {MAX_ITEMS} values")
        if value is None or type(value) in (bool, int, float):
            return value
        if type(value) is str:
            return _text(value, MAX_STRING)
        _require(type(value) is dict, f"a JSON {type(value).__name__} where a value belongs")
        tag = value.get("t")
        _require(type(tag) is str and tag in _FIELDS, f"the unknown tag {str(tag)[:40]!r}")
        _require(sorted(value) == sorted(("t",) + _FIELDS[tag]), f"the fields {sorted(value)[:10]} of a {tag}")
        return self.readers[tag](value, depth)

    def items_of(self, record: Dict[str, Any], depth: int) -> List[Any]:
        _require(depth < MAX_DEPTH, f"containers nested more than {MAX_DEPTH} deep")
        _require(type(record["v"]) is list, f"no list of items in a {record['t']}")
        return [self.value(item, depth + 1) for item in record["v"]]

    def list(self, record: Dict[str, Any], depth: int) -> list:
        return self.items_of(record, depth)

    def tuple(self, record: Dict[str, Any], depth: int) -> tuple:
        return tuple(self.items_of(record, depth))

    def set(self, record: Dict[str, Any], depth: int) -> Any:
        items = self.items_of(record, depth)
        _require(all(_plain_key(item) for item in items), f"an element of a {record['t']} that no key can be")
        result = set(items)
        _require(len(result) == len(items), f"an element twice in a {record['t']}")
        return frozenset(result) if record["t"] == "frozenset" else result

    def dict(self, record: Dict[str, Any], depth: int) -> dict:
        _require(depth < MAX_DEPTH, f"containers nested more than {MAX_DEPTH} deep")
        _require(type(record["v"]) is list, "no list of entries in a dict")
        result: dict = {}
        for pair in record["v"]:
            _require(type(pair) is list and len(pair) == 2, "a dict entry that is no [key, value] pair")
            key = self.value(pair[0], depth + 1)
            _require(_plain_key(key), f"a dict key of type {type(key).__name__}")
            _require(key not in result, "a dict key twice")
            result[key] = self.value(pair[1], depth + 1)
        return result

    def size(self, record: Dict[str, Any], depth: int) -> Any:
        sizes = [_count(item) for item in self.items_of(record, depth)]
        if not self.build:
            return _Unbuilt()
        import torch

        return torch.Size(sizes)

    def big_int(self, record: Dict[str, Any], depth: int) -> int:
        text = _text(record["x"], MAX_STRING)
        _require(_HEX.fullmatch(text) is not None, "an int that is no hex number")
        return int(text, 16)

    def dtype(self, record: Dict[str, Any], depth: int) -> Any:
        name = _text(record["v"], MAX_NAME)
        if not self.build:  # which names torch has needs torch: only the name's form is checked
            _require(_DTYPE_NAME.fullmatch(name) is not None, f"the unknown dtype {name!r}")
            return _Unbuilt()
        dtypes = _dtypes()
        _require(name in dtypes, f"the unknown dtype {name!r}")
        return dtypes[name]

    def device(self, record: Dict[str, Any], depth: int) -> Any:
        kind = _text(record["type"], MAX_NAME)
        _require(_DEVICE_TYPE.fullmatch(kind) is not None, f"the device type {kind!r}")
        index = None if record["index"] is None else _count(record["index"], 0, 2**16)
        if not self.build:  # which device types torch knows needs torch: only the form is checked
            return _Unbuilt()
        import torch

        try:
            return torch.device(kind) if index is None else torch.device(kind, index)
        except RuntimeError:
            raise WireError(f"the unknown device type {kind!r}") from None

    def tensor(self, record: Dict[str, Any], depth: int) -> Any:
        name = _text(record["dtype"], MAX_NAME)
        _require(name in TENSOR_DTYPE_BYTES, f"a tensor of dtype {name!r}")
        shape = record["shape"]
        _require(type(shape) is list and len(shape) <= MAX_NDIM, "a tensor shape that is no list of sizes")
        numel = 1
        for size in shape:
            numel *= _count(size)
        offset, length = _count(record["offset"]), _count(record["length"])
        _require(offset + length <= len(self.blob), "a tensor's bytes past the end of the message")
        _require(numel * TENSOR_DTYPE_BYTES[name] == length, f"a tensor of shape {shape[:8]} and {length} bytes")
        _require(_allocatable(shape), f"a tensor shape torch cannot make (its strides overflow): {shape[:8]}")
        self.tensor_bytes += length
        _require(self.tensor_bytes <= self.max_bytes, f"tensors of more than {self.max_bytes} bytes")
        requires_grad, parameter = record["requires_grad"], record["parameter"]
        _require(type(requires_grad) is bool and type(parameter) is bool, "tensor flags that are not bools")
        _require(not requires_grad or name in GRADIENT_DTYPES, "requires_grad on integers")
        region = self.blob[offset:offset + length]
        _require(name != "bool" or not bytes(region).translate(None, b"\x00\x01"),
                 "a bool tensor holding bytes other than 0 and 1")
        if not self.build:
            return _Unbuilt()
        import torch

        tensor = torch.empty(shape, dtype=_dtypes()[name])
        if length:
            tensor.reshape(-1).view(torch.uint8).copy_(torch.frombuffer(bytearray(region), dtype=torch.uint8))
        if parameter:
            return torch.nn.Parameter(tensor, requires_grad=requires_grad)
        return tensor.requires_grad_(requires_grad)

    def opaque(self, record: Dict[str, Any], depth: int) -> Any:
        module, name = _text(record["module"], MAX_NAME), _text(record["name"], MAX_NAME)
        _require(all(text and text.isprintable() for text in (module, name)), "an unprintable type name")
        key = (module, name)
        cls = _OPAQUE_TYPES.get(key) or self.opaque_types.get(key)
        if cls is None:
            _require(len(self.opaque_types) < MAX_OPAQUE_TYPES, f"more than {MAX_OPAQUE_TYPES} unknown types")
            # check counts the type but makes no class, and leaves what later messages are compared with as it was
            cls = type(name, (Opaque,), {"__slots__": (), "__module__": module, "__qualname__": name}) \
                if self.build else Opaque
            self.opaque_types[key] = cls
            if self.build and len(_OPAQUE_TYPES) < _MAX_REMEMBERED_TYPES:  # decoded objects of one type share a class
                _OPAQUE_TYPES[key] = cls
        text = _text(record["repr"], MAX_REPR)
        return cls(text) if self.build else _Unbuilt()


def decode(data: bytes, max_bytes: int = MAX_BYTES) -> Any:
    """The value a message from ``encode`` holds; tensors on the CPU, unknown objects as ``Opaque``.

    Raises:
        WireError: on anything but a well-formed message of at most ``max_bytes`` within the caps (never another
            exception).
    """
    return _guarded(data, max_bytes, build=True)


def check(data: bytes, max_bytes: int = MAX_BYTES) -> None:
    """Raise ``WireError`` where ``decode`` would, without importing torch or building any value (for the
    grader's runner, which passes messages on and needs no torch). Like ``decode``, it counts against the cap on
    unknown types only the types this process has not decoded before, and it remembers none. Two differences: the name of a ``torch.dtype``
    value and the type of a ``torch.device`` are checked for their form only (``decode`` also needs torch to know
    that name: it raises "the unknown dtype ..." or "the unknown device type ..." where ``check`` passes)."""
    _guarded(data, max_bytes, build=False)


def _guarded(data: bytes, max_bytes: int, build: bool) -> Any:
    try:
        return _decode(data, max_bytes, build)
    except WireError:
        raise
    except Exception as error:  # whatever hostile bytes provoke (RecursionError in json, MemoryError, ...)
        raise WireError(f"a malformed message ({type(error).__name__})") from error


def _decode(data: bytes, max_bytes: int, build: bool) -> Any:
    _require(isinstance(data, (bytes, bytearray, memoryview)), f"{type(data).__name__} where bytes belong")
    view = memoryview(data).cast("B")
    _require(len(view) <= max_bytes, f"a message of {len(view)} bytes, over the cap of {max_bytes}")
    start = len(MAGIC) + _HEADER.size
    _require(len(view) >= start and bytes(view[:len(MAGIC)]) == MAGIC, "no wire message (its first bytes differ)")
    text_size, blob_size = _HEADER.unpack(view[len(MAGIC):start])
    _require(start + text_size + blob_size == len(view), "a message whose lengths do not add up")
    text = bytes(view[start:start + text_size]).decode("ascii")
    document = json.loads(text, object_pairs_hook=_object, parse_int=_json_int, parse_constant=_json_constant)
    return _Decoder(view[start + text_size:], max_bytes, build).value(document, 0)


def encode_observation(seen: Mapping["Key", Any], max_bytes: int = MAX_BYTES) -> bytes:
    """An observation (``Key -> value``, as ``observe`` makes it) as one message."""
    for key in seen:
        if not (isinstance(key, tuple) and len(key) == 2 and all(type(part) is str for part in key)):
            raise WireError(f"an observation key that is no Key: {type(key).__name__}")
    return encode({tuple(key): value for key, value in seen.items()}, max_bytes)


def decode_observation(data: bytes, max_bytes: int = MAX_BYTES) -> Dict["Key", Any]:
    """The observation a message from ``encode_observation`` holds, its keys ``Key`` again.

    Raises:
        WireError: on anything but a well-formed observation.
    """
    value = decode(data, max_bytes)
    _require(type(value) is dict, "an observation that is no dict")
    _require(all(type(key) is tuple and len(key) == 2 and all(type(part) is str for part in key) for key in value),
             "an observation key that is no (path, kind) pair")
    from helpers.course.exercises.engine.observe import Key

    return {Key(*key): item for key, item in value.items()}
