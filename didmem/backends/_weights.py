"""Which weight files a checkpoint directory holds, and pickle weights read without running code.

The suites publish their revisions in two formats: safetensors (``model.safetensors`` or
``model-0000i-of-0000n.safetensors`` with ``model.safetensors.index.json``) and PyTorch pickles
(``pytorch_model.bin`` or ``pytorch_model-0000i-of-0000n.bin`` with
``pytorch_model.bin.index.json``), the format in which Pythia's intermediate revisions were
first uploaded. A pickle can name any Python callable to run while it is read, so pickles are
read only through torch's restricted unpickler (``torch.load(..., weights_only=True)``), which
rebuilds tensors and plain containers and refuses every other global. torch is imported inside
the functions that need it.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

from ..errors import CheckpointError

__all__ = ["SAFETENSORS", "PICKLE", "weight_files", "check_pickle_weights",
           "load_pickle_state_dict", "cached_safetensors", "refusal"]

SAFETENSORS = "safetensors"
PICKLE = "pickle"
_SAFE_SINGLE = "model.safetensors"
_SAFE_INDEX = "model.safetensors.index.json"
_BIN_SINGLE = "pytorch_model.bin"
_BIN_INDEX = "pytorch_model.bin.index.json"
_OTHER_PICKLES = ("*.pt", "*.pth", "*.ckpt")


def _shards(directory: Path, index_name: str, where: str) -> list:
    index = directory / index_name
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(
            f"{where}: {index} is not a weight index (a JSON object with a 'weight_map'): "
            f"{type(exc).__name__}: {exc}"
        ) from None
    bad = ([] if isinstance(weight_map, dict) else [("weight_map", weight_map)]) or [
        (k, v) for k, v in weight_map.items()
        if not isinstance(v, str) or Path(v).name != v or v in ("", ".", "..")]
    if bad:
        key, value = bad[0]
        raise CheckpointError(
            f"{where}: {index} is not a weight index: its 'weight_map' must map parameter "
            f"names to file names in the directory; {key!r} maps to {value!r}."
        )
    names = sorted(set(weight_map.values()))
    missing = [n for n in names if not (directory / n).is_file()]
    if missing:
        raise CheckpointError(
            f"{where}: {index} names {len(missing)} shard(s) that are not in the directory, "
            f"e.g. {missing[0]!r}."
        )
    return [directory / n for n in names]


def weight_files(directory, where: str) -> tuple:
    """The format and the files of a checkpoint directory's weights.

    Safetensors win when both formats are present.

    Parameters
    ----------
    directory : path
        A checkpoint directory saved with ``save_pretrained``.
    where : str
        How errors name the checkpoint.

    Returns
    -------
    tuple of (str, list of pathlib.Path)
        ``"safetensors"`` or ``"pickle"``, and the weight files.

    Raises
    ------
    CheckpointError
        Neither format is there (naming any other pickle files found, which are not loaded).
    """
    directory = Path(directory)
    if (directory / _SAFE_INDEX).is_file():
        return SAFETENSORS, _shards(directory, _SAFE_INDEX, where)
    safe = sorted(directory.glob("*.safetensors"))
    if safe:
        return SAFETENSORS, safe
    if (directory / _BIN_INDEX).is_file():
        return PICKLE, _shards(directory, _BIN_INDEX, where)
    if (directory / _BIN_SINGLE).is_file():
        return PICKLE, [directory / _BIN_SINGLE]
    others = sorted({p.name for pat in _OTHER_PICKLES for p in directory.glob(pat)}
                    | {p.name for p in directory.glob("*.bin")})
    if others:
        raise CheckpointError(
            f"{where} holds no model.safetensors or pytorch_model.bin weights, only "
            f"{', '.join(others)}; didmem reads transformers' weight files only. Convert them "
            "with model.save_pretrained(dir)."
        )
    raise CheckpointError(f"{where} holds no model.safetensors or pytorch_model.bin weights.")


def refusal(exc: BaseException) -> str:
    """What a restricted-unpickler error says, in a few words on one line.

    torch's message goes on to advise loading with ``weights_only=False``, which would run the
    file's code; that advice is never passed on.
    """
    text = str(exc)
    found = re.search(r"[Uu]nsupported (?:global: )?GLOBAL ([\w.]+)", text)
    if found:
        return f"its pickle calls {found.group(1)}, which is not a tensor or a plain container"
    found = re.search(r"WeightsUnpickler error:\s*([^\n]+)", text)
    if found:
        return f"its pickle is refused by torch's restricted unpickler ({found.group(1)[:160]})"
    lines = [line.strip() for line in text.splitlines() if line.strip()
             and not re.search(r"weights.only|can still be loaded|trust", line, re.I)]
    return (lines[0] if lines else type(exc).__name__)[:200]


def load_pickle_state_dict(file, where: str, *, map_location="cpu") -> dict:
    """Read one pickle weight file with torch's restricted unpickler.

    Parameters
    ----------
    file : path
        A ``pytorch_model*.bin`` file.
    where : str
        How errors name the checkpoint.
    map_location : str
        Where tensors go; ``"meta"`` checks the file without reading tensor data.

    Returns
    -------
    dict
        Parameter name to tensor.

    Raises
    ------
    CheckpointError
        One line naming the file, when the pickle would call anything but torch's tensor
        rebuilders (its code is never run), or the file is not a torch pickle.
    """
    import pickle

    import torch

    file = Path(file)
    zipped = _is_zip(file)
    try:
        state = torch.load(file, map_location=map_location, weights_only=True,
                           mmap=zipped and map_location != "meta")
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"{where}: {file} is refused: {refusal(exc)}; didmem reads pickle weights only "
            "through torch's restricted unpickler (weights_only=True) and never runs their code."
        ) from None
    except (RuntimeError, OSError, EOFError, ValueError) as exc:
        raise CheckpointError(f"{where}: {file} is not a readable torch weight file: "
                              f"{refusal(exc)}.") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(
            f"{where}: {file} does not hold a state dict (a mapping of names to tensors)."
        )
    return state


def _is_zip(file: Path) -> bool:
    with open(file, "rb") as handle:
        return handle.read(4) == b"PK\x03\x04"


def check_pickle_weights(files, where: str) -> None:
    """Check every pickle weight file's records and pickle (:mod:`._weight_records`), reading
    no tensor data and running none of its code."""
    from ._weight_records import check_weight_files

    check_weight_files(PICKLE, files, where)


def _cache_key(directory: Path, files) -> str:
    digest = hashlib.sha256(str(directory.resolve()).encode())
    for file in sorted(files):
        stat = file.stat()
        digest.update(f"{file.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:24]


def cached_safetensors(directory, files, cache, where: str) -> Path:
    """A safetensors copy of a pickle checkpoint, made once in ``cache`` and reused.

    The copy's key is the directory's absolute path with each weight file's name, size and
    modification time, so a changed file is converted again. The copy holds every file of the
    directory but the pickle weights, and ``model.safetensors``; it is written to a temporary
    directory and renamed into place, so an interrupted conversion leaves no copy behind.

    Returns
    -------
    pathlib.Path
        The directory to load instead of ``directory``.
    """
    from safetensors.torch import save_file

    directory = Path(directory)
    target = Path(cache) / _cache_key(directory, files)
    if (target / _SAFE_SINGLE).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        state = {}
        for file in files:
            state.update(load_pickle_state_dict(file, where))
        seen = {}
        for name, tensor in state.items():
            key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.shape)
            # safetensors stores no shared or strided tensors: give each its own copy
            state[name] = tensor.clone() if key in seen else tensor.contiguous()
            seen[key] = name
        save_file(state, str(tmp / _SAFE_SINGLE), metadata={"format": "pt"})
        skip = {f.name for f in files} | {_BIN_INDEX}
        for item in directory.iterdir():
            if item.is_file() and item.name not in skip:
                shutil.copy2(item, tmp / item.name)
        try:
            tmp.replace(target)
        except OSError:  # another process converted it meanwhile
            if not (target / _SAFE_SINGLE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
