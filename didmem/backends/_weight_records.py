"""What a checkpoint's weight files claim, checked before any tensor data is read.

A weight file says, for every tensor, where its bytes lie (a record of a torch zip archive, or
a span of a safetensors buffer), their dtype, shape, strides and offset. A hostile or damaged
file can claim bytes outside its own record (a storage shorter than the tensor, a stride or an
offset that reaches past it), sizes no file holds, a record that inflates to gigabytes, or
shapes that the model's config does not have; torch and transformers then read other records
or zip headers as weights, allocate without bound, or fail deep inside with a foreign error.
The functions here read only the archive's directory, the local record headers, the pickle
(``data.pkl``, bounded) and the safetensors header (bounded), never a weight, and refuse such a
file with a :class:`~didmem.errors.CheckpointError` naming the file, the record and the reason.

Bounds (stated, not tuned):

- every record of a torch archive is stored uncompressed (torch writes them so; a deflated
  record is refused without inflating it) and lies inside the file, no two overlapping;
- ``data.pkl`` holds at most :data:`MAX_PICKLE_BYTES`; a safetensors header at most
  :data:`MAX_HEADER_BYTES` (safetensors' own limit);
- a storage's bytes (elements times item size) equal its record's size exactly; a tensor's
  sizes, strides and offset are non-negative integers below :data:`MAX_INDEX`, and its last
  element lies inside its storage;
- a safetensors tensor's span is exactly its elements times item size, inside the buffer, and
  the spans do not overlap;
- where the model's expected shapes are given, every tensor the model has takes its shape.

The pickle is read by :class:`_RecordReader`, a :class:`pickle.Unpickler` whose globals are
stand-ins that only record their arguments: no callable of the file runs, and torch is not
imported.
"""

from __future__ import annotations

import collections
import io
import json
import math
import pickle
import struct
import zipfile
from pathlib import Path

from ..errors import CheckpointError

__all__ = ["MAX_PICKLE_BYTES", "MAX_HEADER_BYTES", "MAX_INDEX", "pickle_shapes",
           "legacy_pickle_shapes",
           "safetensors_shapes", "check_weight_files", "check_shapes"]

MAX_PICKLE_BYTES = 16 << 20
MAX_HEADER_BYTES = 100_000_000
MAX_INDEX = 1 << 48

# torch's legacy storage classes (as pickled) and safetensors' dtypes: bytes per element.
_STORAGE_ITEMSIZE = {
    "DoubleStorage": 8, "FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2,
    "LongStorage": 8, "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1, "ByteStorage": 1,
    "BoolStorage": 1, "ComplexFloatStorage": 8, "ComplexDoubleStorage": 16,
    "Float8_e4m3fnStorage": 1, "Float8_e5m2Storage": 1, "UntypedStorage": 1,
}
_SAFE_ITEMSIZE = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")


def _refuse(where, file, record, reason) -> CheckpointError:
    at = f"record {record!r}: " if record else ""
    return CheckpointError(f"{where}: {file} is refused before any weight is read: {at}{reason}.")


# ------------------------------------------------------------------ the torch zip archive
class _StorageType:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class _Storage:
    __slots__ = ("key", "itemsize", "numel", "storage_type")

    def __init__(self, key, itemsize, numel, storage_type):
        self.key, self.itemsize, self.numel, self.storage_type = key, itemsize, numel, storage_type


class _Tensor:
    __slots__ = ("storage", "offset", "size", "stride")

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


class _Refused(CheckpointError):
    """What the stand-in unpickler refuses; turned into the file's message by its reader."""


def _rebuild_tensor(storage, offset, size, stride, *_rest):
    if not isinstance(storage, _Storage):
        raise _Refused("a tensor is rebuilt from something that is not a storage")
    return _Tensor(storage, offset, size, stride)


def _rebuild_parameter(data, *_rest):
    if not isinstance(data, _Tensor):
        raise _Refused("a parameter is rebuilt from something that is not a tensor")
    return data


_GLOBALS = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("collections", "OrderedDict"): collections.OrderedDict,
}


class _RecordReader(pickle.Unpickler):
    """An unpickler that builds stand-ins for storages and tensors and calls nothing else."""

    def find_class(self, module, name):
        if (module, name) in _GLOBALS:
            return _GLOBALS[(module, name)]
        if module == "torch" and name in _STORAGE_ITEMSIZE:
            return _StorageType(name)
        raise _Refused(f"its pickle calls {module}.{name}, which is not a tensor or a plain "
                       "container; didmem reads pickles only with a restricted unpickler (as "
                       "torch's weights_only=True) and never runs their code")

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) == 6 and pid[5] is None:
            pid = pid[:5]  # torch's legacy format: a sixth entry for views (none here)
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)
                and _is_index(pid[4])):
            raise _Refused(f"a storage reference is malformed: {_short(pid)}")
        storage_type = pid[1].name
        return _Storage(pid[2], _STORAGE_ITEMSIZE[storage_type], pid[4], storage_type)


def _is_index(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_INDEX


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _zip_records(file: Path, where) -> tuple:
    """The archive's records: name -> (start, size); and its pickle's name."""
    size = file.stat().st_size
    try:
        with zipfile.ZipFile(file) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError,
            struct.error, NotImplementedError) as exc:
        raise _refuse(where, file, None, f"it is not a readable zip archive ({exc})") from None
    records, spans = {}, []
    with open(file, "rb") as handle:
        for info in infos:
            name = info.filename
            if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
                raise _refuse(where, file, name,
                              f"it is compressed and would inflate to {info.file_size:,} bytes "
                              f"from {info.compress_size:,}; torch stores every record "
                              "uncompressed, and didmem inflates none")
            handle.seek(info.header_offset)
            header = handle.read(_LOCAL_HEADER.size)
            if len(header) < _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
                raise _refuse(where, file, name, f"its local header at byte {info.header_offset:,}"
                              " is missing or damaged")
            fields = _LOCAL_HEADER.unpack(header)
            start = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
            if start + info.file_size > size:
                raise _refuse(where, file, name,
                              f"its {info.file_size:,} bytes from byte {start:,} reach past the "
                              f"end of the file ({size:,} bytes)")
            if name in records:
                raise _refuse(where, file, name, "the archive holds two records of this name")
            records[name] = (start, info.file_size)
            spans.append((start, start + info.file_size, name))
    spans.sort()
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:
            raise _refuse(where, file, second, f"its bytes overlap those of record {first!r}")
    pickles = [n for n in records if n.endswith("/data.pkl") or n == "data.pkl"]
    if len(pickles) != 1:
        raise _refuse(where, file, None, f"a torch archive holds one data.pkl; this one holds "
                      f"{len(pickles)}")
    return records, pickles[0]


def pickle_shapes(file, where) -> dict:
    """The shape of every tensor of a torch zip weight file, read without reading weights.

    Returns
    -------
    dict
        Parameter name to shape (a tuple of int).

    Raises
    ------
    CheckpointError
        The archive, its pickle, or a tensor's claim on its record breaks a bound of this
        module; the message names the file, the record and the reason.
    """
    file = Path(file)
    records, pkl = _zip_records(file, where)
    start, length = records[pkl]
    if length > MAX_PICKLE_BYTES:
        raise _refuse(where, file, pkl, f"it holds {length:,} bytes; a state dict's pickle holds "
                      f"at most {MAX_PICKLE_BYTES:,} (a stated bound)")
    with open(file, "rb") as handle:
        handle.seek(start)
        data = handle.read(length)
    state = _state(data, file, where, pkl)
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, _Tensor) for k, v in state.items()):
        raise _refuse(where, file, pkl, "it does not hold a state dict (a mapping of names to "
                      "tensors)")
    prefix = pkl[: -len("data.pkl")]
    return {name: _check_tensor(name, tensor, records, prefix, file, where)
            for name, tensor in state.items()}


def _state(data: bytes, file, where, record):
    """Unpickle ``data`` with the stand-ins; a flat state dict of stand-in tensors."""
    reader = _RecordReader(io.BytesIO(data))
    try:
        state = reader.load()
    except _Refused as exc:
        raise _refuse(where, file, record, str(exc)) from None
    except Exception as exc:  # any malformed pickle; nothing of the file ran
        raise _refuse(where, file, record, f"its pickle is malformed ({type(exc).__name__}: "
                      f"{_short(str(exc))})") from None
    return state


_LEGACY_PROTOCOL = 1001


def legacy_pickle_shapes(file, where) -> dict:
    """:func:`pickle_shapes` for torch's legacy format (``torch.save`` before torch 1.6).

    The file holds five pickles (magic number, protocol, system info, the state dict, the
    storage keys), at most :data:`MAX_PICKLE_BYTES` together, then each storage in the keys'
    order: its element count (8 bytes) and its bytes. The records are found by walking those
    headers, never reading a weight.
    """
    file = Path(file)
    size = file.stat().st_size
    with open(file, "rb") as handle:
        head = handle.read(MAX_PICKLE_BYTES)
    stream = io.BytesIO(head)
    where_pickles = "the pickles"
    try:
        magic, protocol, info = (_RecordReader(stream).load() for _ in range(3))
        state = _RecordReader(stream).load()
        keys = _RecordReader(stream).load()
    except _Refused as exc:
        raise _refuse(where, file, where_pickles, str(exc)) from None
    except Exception as exc:
        cut = size > MAX_PICKLE_BYTES and stream.tell() >= len(head) - 1
        reason = (f"its pickles exceed {MAX_PICKLE_BYTES:,} bytes (a stated bound)" if cut else
                  f"its pickles are malformed ({type(exc).__name__}: {_short(str(exc))})")
        raise _refuse(where, file, where_pickles, reason) from None
    if (magic, protocol) != (0x1950a86a20f9469cfc6c, _LEGACY_PROTOCOL) or not isinstance(
            info, dict) or info.get("little_endian") is not True:
        raise _refuse(where, file, where_pickles, "it is not a little-endian torch pickle of "
                      f"protocol {_LEGACY_PROTOCOL}")
    if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, _Tensor) for k, v in state.items()):
        raise _refuse(where, file, where_pickles, "it does not hold a state dict (a mapping of "
                      "names to tensors)")
    kinds = {t.storage.key: t.storage for t in state.values()}
    if not isinstance(keys, list) or sorted(map(str, keys)) != sorted(kinds):
        raise _refuse(where, file, where_pickles, "its list of storages is not the storages "
                      "its tensors use")
    records, at = {}, stream.tell()
    with open(file, "rb") as handle:
        for key in keys:
            name = f"data/{key}"
            handle.seek(at)
            header = handle.read(8)
            if len(header) < 8:
                raise _refuse(where, file, name, f"its header at byte {at:,} is past the end "
                              f"of the file ({size:,} bytes)")
            (count,) = struct.unpack("<q", header)
            held = count * kinds[key].itemsize
            if not 0 <= count < MAX_INDEX or at + 8 + held > size:
                raise _refuse(where, file, name, f"it claims {count:,} elements from byte "
                              f"{at + 8:,}, past the end of the file ({size:,} bytes)")
            records[name] = (at + 8, held)
            at += 8 + held
    return {name: _check_tensor(name, tensor, records, "", file, where)
            for name, tensor in state.items()}


def _check_tensor(name, tensor, records, prefix, file, where) -> tuple:
    storage = tensor.storage
    record = f"{prefix}data/{storage.key}"
    if record not in records:
        raise _refuse(where, file, record, f"tensor {name!r} refers to it, but the archive has "
                      "no such record")
    held = records[record][1]
    claimed = storage.numel * storage.itemsize
    if claimed != held:
        raise _refuse(where, file, record,
                      f"tensor {name!r} claims a {storage.storage_type} of {storage.numel:,} elements "
                      f"({claimed:,} bytes), but the record holds {held:,} bytes")
    size, stride, offset = tensor.size, tensor.stride, tensor.offset
    if not (isinstance(size, tuple) and isinstance(stride, tuple) and len(size) == len(stride)
            and all(map(_is_index, size + stride)) and _is_index(offset)):
        raise _refuse(where, file, record,
                      f"tensor {name!r} has sizes {_short(size)}, strides {_short(stride)} and "
                      f"offset {_short(offset)}; each must be an integer in [0, 2**48)")
    if all(size):
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= storage.numel:
            raise _refuse(where, file, record,
                          f"tensor {name!r} (sizes {size}, strides {stride}, offset {offset}) "
                          f"reaches element {last:,} of a storage of {storage.numel:,}: its "
                          "bytes would come from outside its record")
    elif offset > storage.numel:
        raise _refuse(where, file, record, f"tensor {name!r} starts at element {offset:,} of a "
                      f"storage of {storage.numel:,}")
    return tuple(size)


# ------------------------------------------------------------------ safetensors
def safetensors_shapes(file, where) -> dict:
    """The shape of every tensor of a safetensors file, from its header only.

    Raises
    ------
    CheckpointError
        The file is empty or cut short, its header is too large, not JSON, or claims spans
        that are not exactly its tensors' bytes inside the file.
    """
    file = Path(file)
    total = file.stat().st_size
    with open(file, "rb") as handle:
        head = handle.read(8)
        if len(head) < 8:
            raise _refuse(where, file, None, f"it holds {total} bytes, fewer than the 8 of a "
                          "safetensors header's length (empty or cut short)")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES or length > total - 8:
            raise _refuse(where, file, None,
                          f"its header claims {length:,} bytes; the file holds {total - 8:,} "
                          f"after the length and a header holds at most {MAX_HEADER_BYTES:,}")
        raw = handle.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _refuse(where, file, None, f"its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise _refuse(where, file, None, f"its header is a JSON {type(header).__name__}, not an "
                      "object of tensors")
    buffer = total - 8 - length
    spans, shapes = [], {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shape, dtype, offsets = ((entry.get(k) for k in ("shape", "dtype", "data_offsets"))
                                 if isinstance(entry, dict) else (None, None, None))
        if (not isinstance(shape, list) or not all(map(_is_index, shape))
                or dtype not in _SAFE_ITEMSIZE or not isinstance(offsets, list)
                or len(offsets) != 2 or not all(map(_is_index, offsets))):
            raise _refuse(where, file, name, f"its header entry {_short(entry)} is not a dtype "
                          f"of {sorted(_SAFE_ITEMSIZE)}, a shape and two data offsets")
        begin, end = offsets
        need = math.prod(shape) * _SAFE_ITEMSIZE[dtype]
        if end - begin != need or end > buffer:
            raise _refuse(where, file, name,
                          f"a {dtype} tensor of shape {tuple(shape)} needs {need:,} bytes; its "
                          f"span is bytes {begin:,} to {end:,} of a buffer of {buffer:,}")
        spans.append((begin, end, name))
        shapes[name] = tuple(shape)
    spans.sort()
    for (_, end, first), (start, _, second) in zip(spans, spans[1:]):
        if start < end:
            raise _refuse(where, file, second, f"its bytes overlap those of tensor {first!r}")
    covered = spans[-1][1] if spans else 0
    if covered != buffer:
        raise _refuse(where, file, None, f"its tensors span {covered:,} bytes of a buffer of "
                      f"{buffer:,}")
    return shapes


# ------------------------------------------------------------------ the whole checkpoint
def check_shapes(found: dict, expected: dict, prefix: str, file, where) -> None:
    """Refuse a tensor whose shape differs from the one the model's config gives it."""
    for name, shape in found.items():
        key = name if name in expected else (
            f"{prefix}.{name}" if f"{prefix}.{name}" in expected else
            name[len(prefix) + 1:] if prefix and name.startswith(prefix + ".") else None)
        if key in expected and tuple(expected[key]) != tuple(shape):
            raise _refuse(where, file, name,
                          f"its shape {tuple(shape)} is not the {tuple(expected[key])} that the "
                          "checkpoint's config.json gives this parameter")


def check_weight_files(fmt: str, files, where, expected=None, prefix: str = "") -> None:
    """Check every weight file of a checkpoint (see the module's bounds); read no weight.

    Parameters
    ----------
    fmt : {"safetensors", "pickle"}
        The files' format.
    files : list of path
    where : str
        How errors name the checkpoint.
    expected : dict, optional
        Parameter name to the shape the model's config gives it.
    prefix : str
        The model's base-model prefix, under which a checkpoint may or may not name its keys.
    """
    for file in files:
        if fmt == "safetensors":
            shapes = safetensors_shapes(file, where)
        elif _is_zip(file):
            shapes = pickle_shapes(file, where)
        elif _is_legacy(file):
            shapes = legacy_pickle_shapes(file, where)
        else:
            raise _refuse(where, file, None, "it is neither a torch zip archive nor a "
                          "safetensors file")
        if expected:
            check_shapes(shapes, expected, prefix, file, where)


def _is_zip(file) -> bool:
    with open(file, "rb") as handle:
        return handle.read(4) == b"PK\x03\x04"


# torch.save's legacy format opens with the pickle of its magic number, 0x1950a86a20f9469cfc6c
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"


def _is_legacy(file) -> bool:
    with open(file, "rb") as handle:
        return handle.read(len(_LEGACY_MAGIC)) == _LEGACY_MAGIC
