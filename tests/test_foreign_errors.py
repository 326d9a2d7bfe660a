"""Files that cannot be read give a didmem error naming the file and what to do, never a
foreign exception (issue 40, item 5: the probe's foreign exceptions)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from didmem import Study
from didmem.backends import CallableBackend
from didmem.backends._parts import PartStore
from didmem.orders.hubble import read_perturbation_info
from didmem.errors import ConfigError, DidmemError, OutputFileError, ParameterError
from didmem.study._tables import load_npy, read_token_ids

STUDY = 'model = "café"\n[backend]\nkind = "frame"\n'


@pytest.mark.parametrize("encode, said", [
    (lambda text: text.encode("utf-32"), "it is UTF-32 text"),
    (lambda text: text.encode("utf-16"), "it is UTF-16 text"),
    (lambda text: text.encode("latin-1"), "byte 0xe9 at position 12 is not UTF-8"),
    (lambda text: bytes(np.random.default_rng(0).integers(128, 256, 64, dtype=np.uint8)),
     "is not UTF-8"),
])
@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_study_file_not_in_utf8_is_named_with_what_to_do(tmp_path, encode, said, suffix):
    path = tmp_path / f"study{suffix}"
    path.write_bytes(encode(STUDY))
    with pytest.raises(ConfigError) as err:
        Study.from_file(path)
    message = str(err.value)
    assert message.startswith(f"config {path}: cannot be read") and said in message
    assert "save it as UTF-8" in message


def test_a_study_file_with_a_utf8_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "study.toml"
    path.write_bytes(STUDY.encode("utf-8-sig"))
    with pytest.raises(ConfigError) as err:  # read; refused later for what it says
        Study.from_file(path)
    assert "cannot be read" not in str(err.value) and "[backend]" in str(err.value)


def _pickled_npy(path):
    np.save(path, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    return path


@pytest.mark.parametrize("mmap_mode", [None, "r"])
def test_a_npy_file_holding_pickled_data_is_never_unpickled(tmp_path, mmap_mode, monkeypatch):
    path = _pickled_npy(tmp_path / "validation.npy")
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    with pytest.raises(ConfigError) as err:
        load_npy(path, "config s.toml: [design] validation", mmap_mode=mmap_mode)
    message = str(err.value)
    assert message.startswith("config s.toml: [design] validation")
    assert str(path) in message and "pickled data" in message and "numpy.save" in message


def test_token_and_unit_files_that_are_not_npy_are_named(tmp_path):
    path = _pickled_npy(tmp_path / "tokens.npy")
    with pytest.raises(ConfigError, match="tokens.npy.*pickled data"):
        read_token_ids(path, "config s.toml: [instances] file")
    garbage = tmp_path / "cut.npy"
    garbage.write_bytes(b"\x93NUMPY\x01\x00garbage")
    with pytest.raises(ConfigError, match=r"cut.npy' is refused: it is not a .npy array"):
        read_token_ids(garbage, "config s.toml: [instances] file")
    from didmem.study.config import InstanceFiles
    tokens = tmp_path / "ok.npy"
    np.save(tokens, np.ones((2, 4), dtype=np.int64))
    files = InstanceFiles(file=tokens, units=_pickled_npy(tmp_path / "units.npy"))
    with pytest.raises(ConfigError, match=r"\[instances\] units .*units.npy.*pickled data"):
        files.load("config s.toml: [instances]")


@pytest.mark.parametrize("content, said", [
    ('{"format": 1, "metrics": ["a"', "Expecting"),  # cut short
    ("[1, 2]", "JSON list"),
    ('"a string"', "JSON str"),
    ('{"sources": [1]}', "JSON dict"),
    (b"\xff\xfe\x00", "codec"),
])
def test_a_damaged_scoring_manifest_names_the_file(tmp_path, content, said):
    manifest = tmp_path / "manifest.json"
    manifest.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(OutputFileError) as err:
        PartStore(tmp_path, {"metrics": ["a"], "sources": {}})
    message = str(err.value)
    assert str(manifest) in message and said in message
    assert "Delete the directory's manifest.json and parts" in message
    # and through the public path: a backend scoring into that directory
    backend = CallableBackend(lambda c, b: {"s": b.lengths.astype(float)}, [0, 1], metrics=["s"])
    with pytest.raises(OutputFileError, match="manifest.json"):
        backend.score([np.arange(3)], out_dir=tmp_path, progress=False)


@pytest.mark.parametrize("content", ['{"settings": ', "[]", '{"files": {}}'])
def test_a_damaged_lab_manifest_names_the_file(tmp_path, content):
    from didmem.lab.outputs import LabDirectory

    (tmp_path / "manifest.json").write_text(content)
    with pytest.raises(OutputFileError) as err:
        LabDirectory(tmp_path).is_complete_run_of({"config": {}})
    assert "manifest.json" in str(err.value) and "--overwrite" in str(err.value)


@pytest.mark.parametrize("loc", [10 ** 30, 2 ** 63, -1, 1.5, True])
def test_a_hubble_position_outside_int64_is_refused_by_line(tmp_path, loc):
    path = tmp_path / "x_perturbation_info.json"
    lines = [{"perturbation_file": "a", "perturbation_idx": 0, "pt_loc": 5},
             {"perturbation_file": "a", "perturbation_idx": 1, "pt_loc": loc}]
    path.write_text("\n".join(json.dumps(r) for r in lines))
    with pytest.raises(ParameterError, match=r"line 2: pt_loc .* below 2\*\*63"):
        read_perturbation_info(path)


def test_foreign_error_classes_are_didmem_errors():
    assert issubclass(OutputFileError, DidmemError) and issubclass(ConfigError, DidmemError)
