"""The wire format: every kind of value comes back as it was, and hostile bytes only ever raise WireError."""
from __future__ import annotations

import collections
import functools
import itertools
import json
import math
import pickle
import random
import struct
import subprocess
import sys
from typing import Any

import pytest
import torch
from torch import nn

from helpers.course.exercises.engine.compare import exactly_equal
from helpers.course.exercises.engine.observe import MISSING, Key, World, observe
from helpers.grade import wire
from helpers.grade.wire import Opaque, WireError, decode, decode_observation, encode, encode_observation


def bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().resolve_conj().resolve_neg().contiguous().reshape(-1).view(torch.uint8)


def same(first: Any, second: Any) -> bool:
    """Equal values of the same Python types all the way down; tensors bit for bit, with their flags; NaN is NaN."""
    if type(first) is not type(second):
        return False
    if isinstance(first, torch.Tensor):
        return (first.dtype == second.dtype and first.shape == second.shape and second.device.type == "cpu"
                and first.requires_grad == second.requires_grad and torch.equal(bits(first), bits(second)))
    if isinstance(first, float):
        return (math.isnan(first) and math.isnan(second)) or (first == second and
                                                              math.copysign(1, first) == math.copysign(1, second))
    if isinstance(first, (list, tuple)):
        return len(first) == len(second) and all(same(a, b) for a, b in zip(first, second))
    if isinstance(first, dict):
        return len(first) == len(second) and all(same(ka, kb) and same(va, vb) for (ka, va), (kb, vb)
                                                 in zip(first.items(), second.items()))
    if isinstance(first, Opaque):
        return repr(first) == repr(second)
    return first == second


def round_trip(value: Any) -> Any:
    return decode(encode(value))


def frame(document: Any, blob: bytes = b"") -> bytes:
    """A message around a JSON document (a str is sent as it is), with lengths that add up."""
    text = (document if isinstance(document, str) else json.dumps(document)).encode()
    return wire.MAGIC + struct.pack(">QQ", len(text), len(blob)) + text + blob


PLAIN = [None, True, False, 0, -7, 2**63, -2**63, 2**64 + 1, -(10**400), 1.5, -0.0, float("inf"), float("-inf"),
         "", "héllo ✓", "\ud800 lone surrogate", "x" * 10_000, [], (), {}, set(), frozenset(), [1, [2, (3,)]],
         (None, "a", 1.0), {"a": 1, 2: "b", 3.5: None, True: [], None: (), (1, ("x", None)): {"deep": [1]}},
         {1, "a", (2, 3)}, frozenset({1.5, None}), torch.float32, torch.bfloat16, torch.int64, torch.bool,
         torch.float8_e4m3fn, torch.device("cpu"), torch.device("cuda", 1), torch.device("cuda"), torch.Size([]),
         torch.Size([2, 0, 3]), [torch.Size([1]), {"lr": 0.1, "betas": (0.9, 0.999), "foreach": None}]]


@pytest.mark.parametrize("value", PLAIN, ids=range(len(PLAIN)))
def test_plain_values_come_back_equal_and_of_the_same_types(value: Any) -> None:
    assert same(value, round_trip(value))


def test_nan_and_missing_come_back() -> None:
    back = round_trip([float("nan"), MISSING, {"state": MISSING}])
    assert math.isnan(back[0]) and back[1] is MISSING and back[2]["state"] is MISSING


def tensors() -> list:
    made = []
    for name in wire.TENSOR_DTYPES:
        dtype = getattr(torch, name)
        full = (torch.randn(4, 6, dtype=torch.float64) * 50).to(dtype) if name != "bool" else torch.rand(4, 6) > 0.5
        made += [full, full.t(), full[::2, 1::3], full[1, 2], full[:0], torch.zeros((), dtype=dtype)]
    return made


def test_tensors_of_every_dtype_shape_and_layout_come_back_bit_for_bit() -> None:
    made = tensors()
    for sent, back in zip(made, round_trip(made)):
        assert same(sent, back) and back.is_contiguous(), (sent.dtype, sent.shape)


def test_nan_in_tensors_and_flags_come_back() -> None:
    nan = torch.tensor([float("nan"), 1.0, -0.0])
    weight = nn.Parameter(torch.randn(2, 3))
    frozen = nn.Parameter(torch.randn(3), requires_grad=False)
    counts = nn.Parameter(torch.arange(3), requires_grad=False)
    leaf = torch.randn(3, dtype=torch.complex64, requires_grad=True)
    computed = leaf * 2  # not a leaf: it comes back as a leaf that requires grad
    back = round_trip([nan, weight, frozen, counts, leaf, computed, leaf.conj()])
    assert same(nan, back[0]) and torch.isnan(back[0][0])
    assert type(back[1]) is nn.Parameter and back[1].requires_grad and same(weight, back[1])
    assert type(back[2]) is nn.Parameter and not back[2].requires_grad and same(frozen, back[2])
    assert type(back[3]) is nn.Parameter and back[3].dtype == torch.int64
    assert type(back[4]) is torch.Tensor and back[4].requires_grad and back[4].is_leaf
    assert back[5].requires_grad and back[5].is_leaf and same(computed, back[5])
    assert torch.equal(back[6], leaf.detach().conj()) and not back[6].is_conj()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_tensors_come_back_on_the_cpu() -> None:
    sent = [torch.randn(4, 6, device="cuda").t(), nn.Parameter(torch.ones(3, device="cuda", dtype=torch.bfloat16)),
            torch.device("cuda", 0)]
    back = round_trip(sent)
    assert same(sent[0].cpu(), back[0]) and type(back[1]) is nn.Parameter and back[1].device.type == "cpu"
    assert back[2] == torch.device("cuda", 0)


def test_one_tensor_sent_twice_is_stored_once_and_comes_back_as_two() -> None:
    tensor = torch.randn(1000)
    once, twice = encode([tensor]), encode([tensor, tensor])
    assert len(twice) - len(once) < 200
    first, second = decode(twice)
    assert torch.equal(first, second) and first.data_ptr() != second.data_ptr()


def test_tensors_torch_cannot_send_as_data_are_opaque() -> None:
    for tensor in (torch.ones(2).to(torch.float8_e4m3fn), torch.ones(2, device="meta"),  # torch 2.4 cannot fill float8
                   torch.eye(2).to_sparse(), torch.ones(2, dtype=torch.uint16)):
        back = round_trip(tensor)
        assert isinstance(back, Opaque) and type(back).__name__ == "Tensor"


def test_unknown_objects_come_back_opaque_under_their_type_name() -> None:
    partial = functools.partial(print, 1)
    back = round_trip([partial, b"raw", 1 + 2j, collections.OrderedDict(a=1), range(3)])
    assert all(isinstance(item, Opaque) for item in back)
    assert [type(item).__name__ for item in back] == ["partial", "bytes", "complex", "OrderedDict", "range"]
    assert type(back[0]).__module__ == "functools" and repr(back[0]) == repr(partial)[:200]
    assert back[0] == back[0] and back[0] != round_trip(partial) and back[0] != partial
    assert type(round_trip(partial)) is type(back[0])  # one class per name: type comparisons still work
    assert repr(round_trip(back[0])) == repr(back[0]) and type(round_trip(back[0])) is type(back[0])
    assert len({back[0]}) == 1  # hashable, by identity


def test_names_and_reprs_are_capped_and_printable() -> None:
    odd = type("A\nB\x7f" + "n" * 200, (), {"__repr__": lambda self: "r" * 10_000})()
    back = round_trip(odd)
    assert type(back).__name__ == ("AB" + "n" * 200)[:80] and len(repr(back)) == 200 and repr(back).endswith("...")


class Hostile:
    """Every method a careless encoder might call raises."""

    def __repr__(self) -> str:
        raise ValueError("no repr")

    def __len__(self) -> int:
        raise AssertionError("len called")

    def __iter__(self) -> Any:
        raise AssertionError("iter called")

    def __eq__(self, other: object) -> bool:
        raise AssertionError("== called")

    def __hash__(self) -> int:
        raise AssertionError("hash called")

    def __getattribute__(self, name: str) -> Any:
        raise AssertionError(f"attribute {name} read")


class Looping:
    def __repr__(self) -> str:
        return repr(self)


class Spoof:
    """Claims to be a list."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return list


class Meta(type):
    def __eq__(cls, other: object) -> bool:
        raise AssertionError("metaclass == called")

    def __hash__(cls) -> int:
        raise AssertionError("metaclass hash called")

    @property
    def __name__(cls) -> str:  # type: ignore[override]
        raise AssertionError("metaclass __name__ called")


class Strange(metaclass=Meta):
    pass


class Listish(list):
    def __iter__(self) -> Any:
        raise AssertionError("iter called")


class Dictish(dict):
    def items(self) -> Any:
        raise AssertionError("items called")


def test_hostile_objects_are_sent_opaque_without_being_touched() -> None:
    back = round_trip([Hostile(), Looping(), Spoof(), Strange(), Listish([1]), Dictish(a=1), {Looping(): 1}])
    assert all(isinstance(item, Opaque) for item in back)
    assert [type(item).__name__ for item in back] == ["Hostile", "Looping", "Spoof", "Strange", "Listish",
                                                      "Dictish", "dict"]
    assert repr(back[0]) == "<Hostile object (its repr raised ValueError)>"
    assert repr(back[1]) == "<Looping object (its repr raised RecursionError)>"


def test_containers_that_contain_themselves_are_cut_at_the_cycle() -> None:
    looped: list = [1]
    looped.append(looped)
    mapping: dict = {"a": 1}
    mapping["self"] = (mapping,)
    back_list, back_dict = round_trip([looped, mapping])
    assert back_list[0] == 1 and isinstance(back_list[1], Opaque)
    assert repr(back_list[1]) == "<a list that contains itself>"
    assert back_dict["a"] == 1 and repr(back_dict["self"][0]) == "<a dict that contains itself>"
    shared = [1]
    assert same(round_trip([shared, shared]), [[1], [1]])  # met twice is no cycle


def test_namedtuples_and_structseqs_come_back_as_plain_tuples() -> None:
    point = collections.namedtuple("Point", "x y")(1, 2)
    maximum = torch.max(torch.tensor([[1.0, 3.0]]), dim=1)
    back = round_trip([point, Key("M1.0.weight", "value"), maximum, {point: 1}])
    assert back[0] == (1, 2) and type(back[0]) is tuple and type(back[1]) is tuple
    assert type(back[2]) is tuple and torch.equal(back[2][0], maximum.values)
    assert back[3] == {(1, 2): 1}


def test_dicts_and_sets_whose_keys_are_not_plain_are_opaque() -> None:
    back = round_trip([{torch.ones(1): 1}, {(1, object()): 3}, {MISSING}])
    assert [type(item).__name__ for item in back] == ["dict", "dict", "set"]


def test_encoding_over_a_cap_raises_wire_error(monkeypatch: pytest.MonkeyPatch) -> None:
    deep: list = []
    for _ in range(wire.MAX_DEPTH):
        deep = [deep]
    with pytest.raises(WireError, match="nested"):
        encode(deep)
    assert same(round_trip(deep[0]), deep[0])
    with pytest.raises(WireError, match="bytes"):
        encode(torch.zeros(1000), max_bytes=3000)
    assert isinstance(decode(encode(torch.zeros(1000), max_bytes=5000), max_bytes=5000), torch.Tensor)
    with pytest.raises(WireError, match="bytes"):
        encode("x" * 3000, max_bytes=3000)
    monkeypatch.setattr(wire, "MAX_ITEMS", 10)
    with pytest.raises(WireError, match="values"):
        encode(list(range(10)))
    monkeypatch.setattr(wire, "MAX_STRING", 10)
    with pytest.raises(WireError, match="characters"):
        encode("x" * 11)
    with pytest.raises(WireError, match="hex digits"):
        encode(2**100)


def one_step_observation() -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.9), foreach=False)
    inputs = torch.randn(5, 3)
    loss = model(inputs).pow(2).mean()
    loss.backward()
    optimizer.step()
    world = World(args=(model, optimizer), modules={"M1": model}, optimizers={"opt1": optimizer},
                  inputs={"x": inputs}, extra={"scale": lambda: 2.0**16})
    return observe(world, returned=(loss.detach(), {"loss": loss.item()}, None))


def test_a_real_observation_comes_back_exactly_equal_key_by_key() -> None:
    seen = one_step_observation()
    back = decode_observation(encode_observation(seen))
    assert list(back) == list(seen) and all(type(key) is Key for key in back)
    assert Key("opt1.M1.0.weight.exp_avg", "state") in back and Key("M1.1.running_mean", "buffer") in back
    for key, value in seen.items():
        assert exactly_equal(value, back[key]) and same(value, back[key]), key


def test_observations_must_be_keyed_by_path_and_kind() -> None:
    with pytest.raises(WireError):
        encode_observation({"x": 1})  # type: ignore[dict-item]
    for value in ([1], {("a",): 1}, {("a", 1): 1}, {"ab": 1}):
        with pytest.raises(WireError):
            decode_observation(encode(value))


def sample_message() -> bytes:
    return encode({("M1.0.weight", "value"): torch.randn(2, 3), "flags": [True, None, 2**70, -1.5, float("nan")],
                   "set": {1, (2, "a")}, "bool": torch.tensor([True, False]), "size": torch.Size([2]),
                   "bf": torch.ones(2, dtype=torch.bfloat16, requires_grad=True), "p": nn.Parameter(torch.ones(1)),
                   "dtype": torch.int8, "device": torch.device("cpu"), "other": functools.partial(print),
                   "missing": MISSING, "fs": frozenset({"a"})})


def test_every_truncation_of_a_message_raises_wire_error() -> None:
    data = sample_message()
    assert isinstance(decode(data), dict)
    wire.check(data)
    for length in range(len(data)):
        for read in (decode, wire.check):
            with pytest.raises(WireError):
                read(data[:length])
    for read in (decode, wire.check):
        with pytest.raises(WireError):
            read(data + b"\x00")


TORCH_NAMES = ("the unknown dtype", "the unknown device type")  # what only decode can refuse: it needs torch


def decodes_or_raises_wire_error(data: bytes) -> None:
    """``decode`` returns or raises WireError, and ``check`` raises exactly when it does (but for the names of
    dtypes and device types, which ``check`` reads for their form only)."""
    try:
        decode(data)
    except WireError as error:
        refused = str(error)
    else:
        refused = None
    try:
        wire.check(data)
    except WireError as error:
        assert refused is not None, f"check refused what decode reads: {error}"
    else:
        assert refused is None or refused.startswith(TORCH_NAMES), f"check passed what decode refused: {refused}"


def test_mutated_messages_only_ever_raise_wire_error() -> None:
    rng = random.Random(1234)
    data = sample_message()
    text_size, blob_size = struct.unpack(">QQ", data[8:24])
    text, blob = data[24:24 + text_size].decode(), data[24 + text_size:]
    for _ in range(1000):  # bytes flipped, inserted, cut, lengths changed
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            where = rng.randrange(len(mutated))
            choice = rng.random()
            if choice < 0.5:
                mutated[where] = rng.randrange(256)
            elif choice < 0.7:
                mutated.insert(where, rng.randrange(256))
            elif choice < 0.8:
                del mutated[where:where + rng.randint(1, 30)]
            else:
                field = rng.choice((8, 16))
                mutated[field:field + 8] = struct.pack(">Q", rng.choice((0, 1, rng.randrange(2**64),
                                                                         len(mutated), text_size, blob_size)))
        decodes_or_raises_wire_error(bytes(mutated))
    for _ in range(1000):  # the JSON document changed, in a message whose lengths add up
        mutated = list(text)
        for _ in range(rng.randint(1, 3)):
            where = rng.randrange(len(mutated))
            mutated[where] = rng.choice('0123456789-.e"[]{},:tfn\\' + "aex" + chr(rng.randrange(0x80)))
        decodes_or_raises_wire_error(frame("".join(mutated), blob[:rng.choice((len(blob), rng.randrange(99)))]))


def test_a_claimed_huge_tensor_is_refused_without_allocating() -> None:
    record = {"t": "tensor", "dtype": "float32", "shape": [10**6, 10**6], "offset": 0, "length": 4 * 10**12,
              "requires_grad": False, "parameter": False}
    with pytest.raises(WireError, match="past the end"):
        decode(frame(record, b"\x00" * 16))
    with pytest.raises(WireError, match="shape"):
        decode(frame({**record, "length": 16}, b"\x00" * 16))
    with pytest.raises(WireError):
        decode(frame({**record, "shape": [-1, -16], "length": 16}, b"\x00" * 16))
    assert decode(frame({**record, "shape": [0, 2**62], "length": 0})).shape == (0, 2**62)


def test_one_region_of_tensor_bytes_used_over_and_over_is_capped() -> None:
    record = {"t": "tensor", "dtype": "uint8", "shape": [1000], "offset": 0, "length": 1000, "requires_grad": False,
              "parameter": False}
    message = frame({"t": "list", "v": [record] * 200}, bytes(1000))
    assert len(decode(message, max_bytes=200_000)) == 200
    with pytest.raises(WireError, match="tensors of more than"):
        decode(message, max_bytes=100_000)
    tensor = torch.zeros(1000, dtype=torch.uint8)
    assert len(encode([tensor] * 200)) < 30_000  # its bytes once, not 200 times
    with pytest.raises(WireError, match="more than 100000 bytes"):
        encode([tensor] * 200, max_bytes=100_000)  # ... but what decoding it makes counts each use
    with pytest.raises(WireError, match="more than 100000 bytes"):
        encode(["x" * 1000] * 200, max_bytes=100_000)


def test_unknown_type_names_in_one_message_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "MAX_OPAQUE_TYPES", 3)
    records = [{"t": "opaque", "module": "m", "name": f"Unheard{index}", "repr": "r"} for index in range(7)]
    assert len(decode(frame({"t": "list", "v": records[:3] * 5}))) == 15
    with pytest.raises(WireError, match="unknown types"):
        decode(frame({"t": "list", "v": records[3:]}))


def tensor_record(**changes: Any) -> dict:
    return {"t": "tensor", "dtype": "float32", "shape": [2], "offset": 0, "length": 8, "requires_grad": False,
            "parameter": False, **changes}


@pytest.mark.parametrize("document", [
    {"t": "__reduce__", "v": ["os.system", ["echo hi"]]},
    {"t": "list", "v": [], "py/object": "os.system"},
    {"t": "list"},
    {"v": [1]},
    {"t": "opaque", "module": "os", "name": "system", "repr": "x", "call": True},
    {"t": "opaque", "module": "os", "name": "a\u0000b", "repr": "x"},
    {"t": "opaque", "module": "os", "name": "", "repr": "x"},
    {"t": "opaque", "module": "os", "name": "n", "repr": "x" * 201},
    {"t": "dtype", "v": "Tensor"},
    {"t": "dtype", "v": "float"},  # aliases are not names torch prints
    {"t": "device", "type": "cuda:0; rm", "index": None},
    {"t": "device", "type": "nodevice", "index": 0},
    {"t": "int", "x": "12"},
    {"t": "int", "x": 12},
    {"t": "set", "v": [1, 1]},
    {"t": "set", "v": [{"t": "list", "v": []}]},
    {"t": "dict", "v": [[1, 2], [1, 3]]},
    {"t": "dict", "v": [[{"t": "tensor"}, 2]]},
    {"t": "dict", "v": [[1, 2, 3]]},
    {"t": "dict", "v": {"a": 1}},
    {"t": "size", "v": [1.0]},
    {"t": "size", "v": [-1]},
    tensor_record(dtype="float8_e4m3fn", length=2),
    tensor_record(dtype="object"),
    tensor_record(shape=[2.0]),
    tensor_record(shape=[True, 2]),
    tensor_record(offset=1),
    tensor_record(length=9),
    tensor_record(requires_grad=1),
    tensor_record(dtype="int32", requires_grad=True),
    tensor_record(shape=[1] * 65, length=4),
    tensor_record(dtype="bool", shape=[8]),
    tensor_record(shape=[0, 2**62, 2**62], length=0),
    tensor_record(shape=[3, 2**63 - 1, 0], length=0),
    [1, 2],
    ])
def test_malformed_documents_raise_wire_error(document: Any) -> None:
    blob = b"\x00\x01\x02\x03\x04\x05\x06\x07"
    with pytest.raises(WireError):
        decode(frame(document, blob))
    decodes_or_raises_wire_error(frame(document, blob))  # check refuses it too, unless only torch can tell


def test_zero_element_shapes_decode_exactly_where_torch_can_make_them() -> None:
    sizes = [0, 1, 3, 2**31, 2**32, 2**62, 2**62 + 1, 2**63 - 1]
    for ndim in (1, 2, 3):
        for shape in itertools.product(sizes, repeat=ndim):
            if 0 not in shape:
                continue
            try:
                torch.empty(list(shape))
            except RuntimeError:
                made = False
            else:
                made = True
            message = frame(tensor_record(shape=list(shape), length=0))
            if made:
                assert decode(message).shape == shape
                wire.check(message)
            else:
                for read in (decode, wire.check):
                    with pytest.raises(WireError, match="strides overflow"):
                        read(message)
    overflowing = torch.empty(0, 1, 1).expand(0, 2**62, 2**62)  # what an honest answer may return
    with pytest.raises(WireError, match="strides overflow"):
        wire.check(encode(overflowing))


def test_check_makes_no_class_and_remembers_no_type() -> None:
    remembered = dict(wire._OPAQUE_TYPES)
    wire.check(frame({"t": "opaque", "module": "m", "name": "NeverDecodedBefore", "repr": "r"}))
    assert wire._OPAQUE_TYPES == remembered


def test_the_wire_dtypes_bytes_and_gradients_are_torchs() -> None:
    for name, size in wire.TENSOR_DTYPE_BYTES.items():
        dtype = getattr(torch, name)
        assert dtype.itemsize == size, name
        assert (name in wire.GRADIENT_DTYPES) == (dtype.is_floating_point or dtype.is_complex), name


def test_check_reads_a_whole_message_without_torch(tmp_path: Any) -> None:
    """The grader's runner passes messages on after ``check``; with torch unimportable, its own modules load,
    ``check`` takes a real message and refuses a broken one, and the runner encodes its own failures."""
    message = tmp_path / "message"
    message.write_bytes(sample_message())
    script = ("import sys\n"
              "sys.modules['torch'] = None\n"
              "from helpers.grade import cells, frames, processes, runner, wire\n"
              "data = open(sys.argv[1], 'rb').read()\n"
              "wire.check(data)\n"
              "try:\n"
              "    wire.check(data[:-1])\n"
              "except wire.WireError:\n"
              "    print('refused')\n"
              "assert wire.decode(runner._failed('the calls broke off')) == {'failed': 'the calls broke off'}\n")
    done = subprocess.run([sys.executable, "-c", script, str(message)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "refused\n", done.stderr[-2000:]


@pytest.mark.parametrize("text", ['{"t": "list", "v": [], "t": "list"}', "[1, 2]", "01", "NaN x",
                                  "1" * 21, '"\\ud800"' * 2, "é", "[" * 100_000, "\x00", ""])
def test_malformed_json_raises_wire_error(text: str) -> None:
    with pytest.raises(WireError):
        decode(frame(text) if text != "é" else wire.MAGIC + struct.pack(">QQ", 2, 0) + "é".encode())


def test_deep_nesting_raises_wire_error() -> None:
    document: Any = 1
    for _ in range(wire.MAX_DEPTH + 1):
        document = {"t": "list", "v": [document]}
    with pytest.raises(WireError, match="nested"):
        decode(frame(document))
    document = 1
    for _ in range(wire.MAX_DEPTH + 1):
        document = {"t": "dict", "v": [["k", document]]}
    with pytest.raises(WireError, match="nested"):
        decode(frame(document))


class Payload:
    def __reduce__(self) -> Any:
        return (print, ("pickle ran",))


def test_pickles_and_torch_files_are_refused(tmp_path: Any, capsys: pytest.CaptureFixture) -> None:
    for data in (pickle.dumps(Payload()), pickle.dumps([1, 2]), wire.MAGIC + struct.pack(">QQ", 0, 0)):
        with pytest.raises(WireError):
            decode(data)
    torch.save({"w": torch.ones(2)}, tmp_path / "w.pt")
    with pytest.raises(WireError):
        decode((tmp_path / "w.pt").read_bytes())
    body = pickle.dumps(Payload())
    with pytest.raises(WireError):
        decode(wire.MAGIC + struct.pack(">QQ", len(body), 0) + body)
    assert "pickle ran" not in capsys.readouterr().out


def test_what_is_not_bytes_or_over_the_cap_raises_wire_error() -> None:
    data = encode([1, 2, 3])
    assert decode(bytearray(data)) == [1, 2, 3] and decode(memoryview(data)) == [1, 2, 3]
    for thing in ("text", None, 12, [data]):
        with pytest.raises(WireError):
            decode(thing)  # type: ignore[arg-type]
    with pytest.raises(WireError, match="cap"):
        decode(data, max_bytes=len(data) - 1)
