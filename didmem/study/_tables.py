"""Reading a study file and checking its tables, with one message shape.

Every message starts with where the value is (``config study.toml: [design]``) and names
the key; an unknown key lists the allowed ones and the closest match ("did you mean").
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

from ..errors import ConfigError

__all__ = ["read_token_ids", "replace_atomically", "read_file", "unknown_keys", "need_table",
           "optional_table", "string_list", "closest", "load_npy"]


def closest(word, choices) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to ``word``, or an empty string."""
    if not isinstance(word, str):
        return ""
    match = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def read_file(path: Path) -> dict:
    """The settings of a ``.toml`` or ``.json`` study file, as a dict."""
    if not path.is_file():
        raise ConfigError(f"config {path}: no such file.")
    text = _utf8_text(path)
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config {path}: not valid JSON: {exc}.") from None
    elif path.suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            try:
                import tomli as tomllib
            except ImportError:
                raise ConfigError(
                    f"config {path}: reading TOML needs Python 3.11 or the 'tomli' package; "
                    "or write the configuration as JSON."
                ) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config {path}: not valid TOML: {exc}.") from None
    else:
        raise ConfigError(
            f"config {path}: the file must end in .toml or .json; got {path.suffix or 'none'!r}."
        )
    if not isinstance(data, dict):
        raise ConfigError(f"config {path}: the top level must be a table of settings.")
    return data


_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
         (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))


def _utf8_text(path: Path) -> str:
    """The text of a study file, which TOML and JSON want in UTF-8; a file in another
    encoding, or not text, is refused with what to do."""
    raw = path.read_bytes()
    named = next((name for bom, name in _BOMS if raw.startswith(bom)), None)
    if named is None:
        try:
            return raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            what = (f"byte {raw[exc.start]:#04x} at position {exc.start} is not UTF-8 (a "
                    "file saved as Latin-1 or another encoding, or not text at all)")
    else:
        what = f"it is {named} text"
    raise ConfigError(f"config {path}: cannot be read: {what}. Study files are UTF-8 "
                      "text; save it as UTF-8.")


def load_npy(path: Path, where: str, mmap_mode=None):
    """An array from a ``.npy`` file, never unpickling; ``where`` starts every message."""
    import numpy as np

    try:
        return np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except ValueError as exc:
        objects = "allow_pickle" in str(exc) or "Python objects" in str(exc)
        reason = ("it holds Python objects (pickled data), which didmem never unpickles; save "
                  "a numeric array with numpy.save" if objects
                  else f"it is not a .npy array ({exc})")
    except (OSError, EOFError) as exc:
        reason = f"it cannot be read ({type(exc).__name__}: {exc})"
    raise ConfigError(f"{where} {str(path)!r} is refused: {reason}.")


def unknown_keys(table: dict, allowed, where: str, what: str = "") -> None:
    """Refuse a key of ``table`` that is not in ``allowed``, suggesting the closest one."""
    unknown = sorted(set(table) - set(allowed), key=str)
    if unknown:
        raise ConfigError(
            f"{where} unknown key {unknown[0]!r}{what}{closest(unknown[0], allowed)}; allowed: "
            f"{', '.join(sorted(allowed))}."
        )


def need_table(data: dict, key: str, where: str) -> dict:
    """The table ``data[key]``; a missing table or a value of another type is refused."""
    value = data.get(key)
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: needs a [{key}] table"
                          + ("." if value is None else f"; got {type(value).__name__}."))
    return value


def optional_table(data: dict, key: str, where: str) -> dict:
    """The table ``data[key]``, or an empty one when the key is absent."""
    if key not in data:
        return {}
    if not isinstance(data[key], dict):
        raise ConfigError(f"{where}: [{key}] must be a table; got "
                          f"{type(data[key]).__name__} {data[key]!r}.")
    return data[key]


def string_list(value, key: str, where: str) -> tuple:
    """``value`` as a tuple of strings; anything else is refused."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} {key} must be a list of strings; got {value!r}.")
    return tuple(value)


def replace_atomically(path: Path, write) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it to ``path``.

    The temporary name carries the process id, and it is removed when ``write`` fails, so
    nothing half-written is left behind and two runs never share a temporary file.
    """
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def read_token_ids(path: Path, where: str, column: str | None = None):
    """Token ids from a ``.npy`` file (a 2-D integer array, one row per instance) or, when
    ``column`` is given, from that column of a ``.parquet`` table (lists of ints).

    ``where`` (``config FILE: [design] validation``) starts every message.
    """
    import numpy as np

    if not path.is_file():
        raise ConfigError(f"{where} {str(path)!r} does not exist.")
    if path.suffix == ".npy":
        tokens = load_npy(path, where)
        if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
            raise ConfigError(f"{where} {str(path)!r} must hold a 2-D integer array of token "
                              f"ids; got shape {tokens.shape} and dtype {tokens.dtype}.")
        return tokens
    if path.suffix == ".parquet" and column is not None:
        import pandas as pd

        table = pd.read_parquet(path)
        if column not in table.columns:
            raise ConfigError(f"{where} {str(path)!r} has no column {column!r}; it has "
                              f"{list(table.columns)}.")
        return [np.asarray(t, dtype=np.int64) for t in table[column]]
    kinds = ".npy file or .parquet table" if column is not None else ".npy file"
    raise ConfigError(f"{where} {str(path)!r} must be a {kinds} of token ids.")
