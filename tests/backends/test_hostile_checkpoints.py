"""Hostile and damaged weight files are refused before any weight is read (issue 40, item 5).

Every hostile file is built here, in code, from a tiny GPT-NeoX checkpoint: a torch zip
archive rewritten record by record (its pickle written by a pickler that emits the same
opcodes as ``torch.save``), or a safetensors file with a forged header. Each must be refused
with a :class:`~didmem.errors.CheckpointError` that names the file, the record and the reason,
before torch or transformers reads a weight.
"""

from __future__ import annotations

import collections
import io
import json
import pickle
import shutil
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from .backend_helpers import VOCAB, build_checkpoints

from didmem.backends import CheckpointError, TransformersBackend
from didmem.backends import _weight_records, _weights
from didmem.errors import DidmemError

EMBED = "gpt_neox.embed_in.weight"


# ------------------------------------------------------------------ building archives
class _Storage:
    def __init__(self, kind, key, numel):
        self.kind, self.key, self.numel = kind, key, numel


class _Tensor:
    """Pickles as torch.save pickles a tensor: _rebuild_tensor_v2(storage, offset, size, ...)."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False,
                     collections.OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", getattr(torch, obj.kind), obj.key, "cpu", obj.numel)
        return None


_KINDS = {torch.float32: "FloatStorage", torch.float16: "HalfStorage",
          torch.bfloat16: "BFloat16Storage", torch.int64: "LongStorage"}


def _parts(state):
    """A state dict as (tensors of the archive's pickle, records' bytes), one record each."""
    tensors, records = {}, {}
    for i, (name, value) in enumerate(state.items()):
        value = value.contiguous()
        key = str(i)
        records[key] = value.numpy().tobytes() if value.dtype != torch.bfloat16 else \
            value.view(torch.int16).numpy().tobytes()
        storage = _Storage(_KINDS[value.dtype], key, value.numel())
        tensors[name] = _Tensor(storage, 0, value.shape, value.stride())
    return tensors, records


def _write_archive(path, tensors, records, deflate=()):
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=2).dump(tensors)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        archive.writestr("archive/byteorder", "little")
        for key, data in records.items():
            kind = zipfile.ZIP_DEFLATED if key in deflate else zipfile.ZIP_STORED
            archive.writestr(zipfile.ZipInfo(f"archive/data/{key}"), data, compress_type=kind)
        archive.writestr("archive/version", "3\n")
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A tiny checkpoint (safetensors) and its state dict."""
    root = tmp_path_factory.mktemp("hostile")
    source = build_checkpoints(root, n=1)[0]
    state = transformers.AutoModelForCausalLM.from_pretrained(source).state_dict()
    return source, {k: v.detach().clone() for k, v in state.items()}


def _checkpoint(base, tmp_path, name="ckpt"):
    """A copy of the base checkpoint without weights."""
    source, _ = base
    target = tmp_path / name
    target.mkdir()
    for item in source.iterdir():
        if item.suffix != ".safetensors":
            shutil.copy2(item, target / item.name)
    return target


def _pickle_checkpoint(base, tmp_path, edit=None, deflate=()):
    target = _checkpoint(base, tmp_path)
    tensors, records = _parts(base[1])
    if edit is not None:
        edit(tensors, records)
    _write_archive(target / "pytorch_model.bin", tensors, records, deflate)
    return target


def _tokens():
    rng = np.random.default_rng(0)
    return [rng.integers(1, VOCAB, 12) for _ in range(3)]


def _refused(target, monkeypatch, *patterns):
    """Score ``target``; it must be refused by a CheckpointError before any weight is loaded."""
    from didmem.backends import _loading

    def never(*args, **kwargs):
        raise AssertionError("weights were loaded")

    monkeypatch.setattr(_loading, "load_model", never)
    backend = TransformersBackend({0: target}, device="cpu")
    with pytest.raises(CheckpointError) as err:
        backend.score(_tokens(), progress=False)
    message = str(err.value)
    assert isinstance(err.value, DidmemError) and "\n" not in message
    assert "weights_only=False" not in message
    assert str(target) in message  # the directory as given, not lower-cased
    for pattern in patterns:
        assert pattern in message, message
    return message


def _embed_storage(tensors):
    return tensors[EMBED].args[0]


# ------------------------------------------------------------------ the control
def test_archive_written_here_is_read_by_torch_and_passes(base, tmp_path):
    """The archives of these tests are real torch archives: torch reads the control back
    bit for bit, and the checks accept it and score it like the safetensors original."""
    target = _pickle_checkpoint(base, tmp_path)
    back = torch.load(target / "pytorch_model.bin", weights_only=True)
    assert list(back) == list(base[1])
    assert all(torch.equal(back[k], base[1][k]) for k in back)
    shapes = _weight_records.pickle_shapes(target / "pytorch_model.bin", "here")
    assert shapes[EMBED] == (VOCAB, 32)
    got = TransformersBackend({0: target}, device="cpu").score(_tokens(), progress=False)
    expected = TransformersBackend({0: base[0]}, device="cpu").score(_tokens(), progress=False)
    np.testing.assert_allclose(got["sequence_loglik"], expected["sequence_loglik"], rtol=1e-6)


# ------------------------------------------------------------------ hostile pickles
def _short_record(tensors, records):
    key = _embed_storage(tensors).key
    records[key] = records[key][: len(records[key]) // 2]  # the tensor claims twice this


def _stride_past(tensors, records):
    storage, offset, size, stride, *rest = tensors[EMBED].args
    tensors[EMBED].args = (storage, offset, size, (stride[0] * 2, 1), *rest)


def _negative_stride(tensors, records):
    storage, offset, size, stride, *rest = tensors[EMBED].args
    tensors[EMBED].args = (storage, offset, size, (-stride[0], 1), *rest)


def _huge_offset(tensors, records):
    storage, offset, size, stride, *rest = tensors[EMBED].args
    tensors[EMBED].args = (storage, 2 ** 62, size, stride, *rest)


def _terabyte_storage(tensors, records):
    _embed_storage(tensors).numel = 2 ** 40


def _missing_record(tensors, records):
    del records[_embed_storage(tensors).key]


def _runs_code(tensors, records):
    tensors["payload"] = _Eval()


class _Eval:
    def __reduce__(self):
        return eval, ("1 + 1",)


@pytest.mark.parametrize("edit, patterns", [
    (_short_record, ["record 'archive/data/0'", f"tensor '{EMBED}' claims a FloatStorage of "
                     "3,072 elements (12,288 bytes), but the record holds 6,144 bytes"]),
    (_stride_past, ["record 'archive/data/0'", "reaches element 6,111 of a storage of 3,072",
                    "outside its record"]),
    (_negative_stride, ["strides (-32, 1)", "each must be an integer in [0, 2**48)"]),
    (_huge_offset, [f"offset {2 ** 62}", "each must be an integer in [0, 2**48)"]),
    (_terabyte_storage, ["1,099,511,627,776 elements (4,398,046,511,104 bytes)",
                         "the record holds 12,288 bytes"]),
    (_missing_record, ["refers to it, but the archive has no such record"]),
    (_runs_code, ["record 'archive/data.pkl'", "its pickle calls __builtin__.eval",
                  "never runs their code"]),
])
def test_hostile_pickle_is_refused_before_any_weight(base, tmp_path, monkeypatch, edit,
                                                     patterns):
    target = _pickle_checkpoint(base, tmp_path, edit)
    _refused(target, monkeypatch, "pytorch_model.bin is refused before any weight is read",
             *patterns)


def test_deflated_record_is_refused_without_inflating(base, tmp_path, monkeypatch):
    def zeros(tensors, records):
        key = _embed_storage(tensors).key
        records[key] = bytes(64 << 20)  # 64 MiB of zeros deflate to about 64 KiB
        _embed_storage(tensors).numel = (64 << 20) // 4
    target = _pickle_checkpoint(base, tmp_path, zeros, deflate={"0"})
    assert (target / "pytorch_model.bin").stat().st_size < 1 << 20
    _refused(target, monkeypatch, "record 'archive/data/0'",
             "would inflate to 67,108,864 bytes from", "didmem inflates none")


def test_zip_claims_past_the_file_are_refused(base, tmp_path, monkeypatch):
    target = _pickle_checkpoint(base, tmp_path)
    file = target / "pytorch_model.bin"
    data = bytearray(file.read_bytes())
    # the central directory's entry of the embedding's record claims 3 GiB, stored
    at = data.index(b"PK\x01\x02")
    while True:
        name_len = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46: at + 46 + name_len] == b"archive/data/0":
            break
        at = data.index(b"PK\x01\x02", at + 4)
    struct.pack_into("<II", data, at + 20, 3 << 30, 3 << 30)
    file.write_bytes(bytes(data))
    _refused(target, monkeypatch, "record 'archive/data/0'", "3,221,225,472 bytes",
             "reach past the end of the file")


def test_not_a_pickle_archive_is_named(base, tmp_path, monkeypatch):
    target = _checkpoint(base, tmp_path)
    (target / "pytorch_model.bin").write_bytes(b"PK\x03\x04 but nothing more")
    _refused(target, monkeypatch, "not a readable zip archive")


def test_checker_reads_no_byte_of_a_weight_record(base, tmp_path, monkeypatch):
    """The checks read the archive's directory, local headers and pickle, never a record."""
    target = _pickle_checkpoint(base, tmp_path, _stride_past)
    file = target / "pytorch_model.bin"
    with zipfile.ZipFile(file) as archive:
        spans = []
        for info in archive.infolist():
            if "/data/" in info.filename:
                with open(file, "rb") as handle:
                    handle.seek(info.header_offset + 26)
                    n, m = struct.unpack("<HH", handle.read(4))
                start = info.header_offset + 30 + n + m
                spans.append((start, start + info.file_size))
    reads = []

    class Tracked(io.FileIO):
        def read(self, size=-1):
            at = self.tell()
            data = super().read(size)
            reads.append((at, at + len(data)))
            return data

    monkeypatch.setattr(_weight_records, "open", lambda path, mode: Tracked(path, "r"),
                        raising=False)
    with pytest.raises(CheckpointError, match="outside its record"):
        _weight_records.pickle_shapes(file, "here")
    assert reads, "the tracker saw the checker's reads"
    for lo, hi in reads:
        assert all(hi <= start or lo >= end for start, end in spans), (lo, hi, spans)


# ------------------------------------------------------------------ safetensors
def _safetensors(base, tmp_path, raw: bytes):
    target = _checkpoint(base, tmp_path)
    (target / "model.safetensors").write_bytes(raw)
    return target


def _original_bytes(base):
    return (base[0] / "model.safetensors").read_bytes()


@pytest.mark.parametrize("make, patterns", [
    (lambda raw: b"", ["holds 0 bytes", "empty or cut short"]),
    (lambda raw: raw[: len(raw) // 2], ["span is bytes"]),
    (lambda raw: struct.pack("<Q", 2 ** 40) + raw[8:], ["header claims 1,099,511,627,776 bytes"]),
    (lambda raw: raw[:8] + b"x" + raw[9:], ["its header is not JSON"]),
    (lambda raw: struct.pack("<Q", 2) + b"[]", ["header is a JSON list"]),
    (lambda raw: raw + b"\0" * 64, ["tensors span"]),
])
def test_malformed_safetensors_is_refused(base, tmp_path, monkeypatch, make, patterns):
    target = _safetensors(base, tmp_path, make(_original_bytes(base)))
    _refused(target, monkeypatch, "model.safetensors is refused before any weight is read",
             *patterns)


def test_safetensors_span_past_its_buffer_is_refused(base, tmp_path, monkeypatch):
    raw = _original_bytes(base)
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8: 8 + length])
    begin, end = header[EMBED]["data_offsets"]
    header[EMBED]["data_offsets"] = [begin + 2 ** 40, end + 2 ** 40]
    text = json.dumps(header).encode()
    target = _safetensors(base, tmp_path,
                          struct.pack("<Q", len(text)) + text + raw[8 + length:])
    _refused(target, monkeypatch, f"record '{EMBED}'", "span is bytes")


def test_index_whose_weight_map_holds_a_number(base, tmp_path, monkeypatch):
    target = _checkpoint(base, tmp_path)
    shutil.copy2(base[0] / "model.safetensors", target / "model.safetensors")
    (target / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {EMBED: 1}}))
    _refused(target, monkeypatch, "model.safetensors.index.json is not a weight index",
             f"{EMBED!r} maps to 1")
    (target / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {EMBED: "../../elsewhere.safetensors"}}))
    _refused(target, monkeypatch, "maps to '../../elsewhere.safetensors'")


# ------------------------------------------------------------------ shapes and config
@pytest.mark.parametrize("fmt", ["safetensors", "pickle"])
def test_config_whose_shapes_disagree_with_the_weights(base, tmp_path, monkeypatch, fmt):
    if fmt == "pickle":
        target = _pickle_checkpoint(base, tmp_path)
    else:
        target = _safetensors(base, tmp_path, _original_bytes(base))
    config = json.loads((target / "config.json").read_text())
    config["intermediate_size"] = 80
    (target / "config.json").write_text(json.dumps(config))
    message = _refused(target, monkeypatch, "that the checkpoint's config.json gives this")
    assert "80)" in message or "(80," in message


def test_directory_name_keeps_its_case(base, tmp_path, monkeypatch):
    target = _checkpoint(base, tmp_path, "MixedCase_Ckpt")
    with pytest.raises(CheckpointError) as err:
        TransformersBackend({0: target}, device="cpu").score(_tokens(), progress=False)
    assert "MixedCase_Ckpt" in str(err.value)
    assert str(err.value).startswith("Checkpoint 0 (")


@pytest.mark.parametrize("payload, said", [
    (pickle.dumps({"x": _Eval()}, protocol=2), "its pickle calls eval"),
    (b"\x80\x02}q\x00X\x01\x00\x00\x00xq\x01\x82\x01.", "Unsupported operand 130"),
])
def test_torch_refusal_never_passes_on_the_weights_only_false_advice(tmp_path, payload, said):
    """torch's restricted unpickler advises weights_only=False; didmem never says it."""
    file = tmp_path / "opcode.pt"
    with zipfile.ZipFile(file, "w") as archive:
        archive.writestr("archive/data.pkl", payload)
        archive.writestr("archive/version", "3\n")
    with pytest.raises(pickle.UnpicklingError) as err:
        torch.load(file, weights_only=True)
    assert "`weights_only` set to `False`" in str(err.value)  # torch's advice, as it stands
    text = _weights.refusal(err.value)
    assert "weights_only" not in text and "False" not in text and said in text, text
    assert "\n" not in text


def test_our_reader_refuses_an_opcode_torch_refuses(base, tmp_path, monkeypatch):
    import copyreg

    def ext(tensors, records):
        tensors["payload"] = _Ext()
    copyreg.add_extension(__name__, "_ext_target", 240)
    try:
        target = _pickle_checkpoint(base, tmp_path, ext)
    finally:
        copyreg.remove_extension(__name__, "_ext_target", 240)
    assert b"\x82\xf0" in (target / "pytorch_model.bin").read_bytes()  # EXT1 240
    _refused(target, monkeypatch, "record 'archive/data.pkl'", "its pickle is malformed")


class _Ext:
    """Pickles as the EXT1 opcode of a copyreg extension code that a reader has not
    registered."""

    def __reduce__(self):
        return _ext_target, ()


def _ext_target():  # pragma: no cover - never called: the reader refuses first
    return None


def test_legacy_pickle_is_checked_and_scores_like_safetensors(base, tmp_path):
    """torch.save's format before torch 1.6: its records are found by walking their headers."""
    target = _checkpoint(base, tmp_path)
    torch.save(base[1], target / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    assert not zipfile.is_zipfile(target / "pytorch_model.bin")
    shapes = _weight_records.legacy_pickle_shapes(target / "pytorch_model.bin", "here")
    assert shapes == {k: tuple(v.shape) for k, v in base[1].items()}
    got = TransformersBackend({0: target}, device="cpu").score(_tokens(), progress=False)
    expected = TransformersBackend({0: base[0]}, device="cpu").score(_tokens(), progress=False)
    np.testing.assert_allclose(got["sequence_loglik"], expected["sequence_loglik"], rtol=1e-6)


@pytest.mark.parametrize("damage", ["cut", "count"])
def test_legacy_pickle_with_a_record_past_the_file_is_refused(base, tmp_path, monkeypatch,
                                                              damage):
    target = _checkpoint(base, tmp_path)
    file = target / "pytorch_model.bin"
    torch.save(base[1], file, _use_new_zipfile_serialization=False)
    raw = bytearray(file.read_bytes())
    if damage == "cut":
        raw = raw[:-100]
    else:  # the first record's element count claims a terabyte
        stream = io.BytesIO(bytes(raw))
        for _ in range(5):  # magic, protocol, system info, the state dict, the storage keys
            _weight_records._RecordReader(stream).load()
        at = stream.tell()
        assert struct.unpack_from("<q", raw, at)[0] in {v.numel() for v in base[1].values()}
        struct.pack_into("<q", raw, at, 2 ** 40)
    file.write_bytes(bytes(raw))
    _refused(target, monkeypatch, "record 'data/", "past the end of the file")


def test_device_is_refused_at_reading():
    with pytest.raises(DidmemError, match=r"'device' .* Got 'tpu9'"):
        TransformersBackend({0: "x"}, device="tpu9")
    assert TransformersBackend({0: "x"}, device="cuda:1").device_name == "cuda:1"


# ------------------------------------------------------------------ memory
_MEMORY_SCRIPT = r"""
import json, resource, sys
import numpy as np
from didmem.backends import CheckpointError, TransformersBackend


def status(key):
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith(key))


def reset_peak():
    # Linux: writing 5 to clear_refs resets VmHWM (the peak) to the current RSS
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


tokens = [np.arange(1, 13)]
peaks = {}
for label, path in json.loads(sys.argv[1]).items():
    exact = reset_peak()
    before = status("VmRSS:") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    try:
        TransformersBackend({0: path}, device="cpu").score(tokens, progress=False)
    except CheckpointError:
        pass
    else:
        raise SystemExit(f"{label} was not refused")
    after = status("VmHWM:") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peaks[label] = [after - before, exact]
print(json.dumps(peaks))
"""


def test_hostile_files_are_refused_in_bounded_memory(tmp_path):
    """Peak memory grows by at most 1.5 times the legitimate model's size while each hostile
    file is refused (a model of about 10 MB): in a fresh process, after one refusal of the same
    kind has warmed the imports, the peak (VmHWM, reset through /proc/self/clear_refs before
    each refusal; ru_maxrss where that is not allowed) less the resident size before it."""
    source = build_checkpoints(tmp_path / "big", n=1, vocab_size=2048, hidden_size=256,
                               intermediate_size=1024)[0]
    legit = (source / "model.safetensors").stat().st_size
    assert legit > 8 << 20
    state = transformers.AutoModelForCausalLM.from_pretrained(source).state_dict()
    paths = {}
    for label, edit, deflate in [
        ("warm-up", _terabyte_storage, ()),
        ("terabyte storage", _terabyte_storage, ()),
        ("short record", _short_record, ()),
        ("offset 2**62", _huge_offset, ()),
        ("stride past", _stride_past, ()),
        ("deflated zeros", None, {"0"}),
    ]:
        target = tmp_path / label.replace(" ", "_").replace("*", "")
        target.mkdir()
        shutil.copy2(source / "config.json", target / "config.json")
        tensors, records = _parts(state)
        if edit is not None:
            edit(tensors, records)
        if deflate:
            records["0"] = bytes(256 << 20)
            _embed_storage(tensors).numel = (256 << 20) // 4
        _write_archive(target / "pytorch_model.bin", tensors, records, deflate)
        paths[label] = str(target)
    out = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, json.dumps(paths)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    peaks = json.loads(out.stdout.strip().splitlines()[-1])
    del peaks["warm-up"]
    assert set(peaks) == set(paths) - {"warm-up"}
    for label, (grew, exact) in peaks.items():
        assert grew <= 1.5 * legit, (label, grew, legit)
