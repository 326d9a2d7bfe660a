"""Options and helpers shared by several subcommands, built from the declarations."""

from __future__ import annotations

import argparse
import sys

from ..errors import MissingFileError, ParameterError, PanelError, optional_import
from ..study.estimate import FIXED_SEED

__all__ = ["bootstrap_option", "seed_option", "progress_option", "panel_column_options", "CLI_SEED", "PANEL_COLUMNS",
           "read_panel_frame", "load_results", "use_agg_backend", "parse_labels", "result_names"]


class _DeprecatedAlias(argparse.Action):
    """An old spelling of an option: stores into the new one and says so on stderr."""

    def __init__(self, option_strings, dest, new: str = "", **kwargs):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"didmem: warning: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


def bootstrap_option(parser) -> None:
    """``--n-bootstrap`` (default from :class:`DiDEstimator`), with the old ``--draws``."""
    from .._validation import add_option
    from ..estimators.did import DiDEstimator

    add_option(parser, DiDEstimator, "n_bootstrap", help="multiplier-bootstrap draws")
    parser.add_argument("--draws", type=int, dest="n_bootstrap", action=_DeprecatedAlias,
                        new="--n-bootstrap", help=argparse.SUPPRESS)


def progress_option(parser) -> None:
    """``--progress`` / ``--no-progress``: the progress line (:mod:`didmem._progress`) on
    standard error. Not given: shown on a terminal only (logs and pipes stay quiet)."""
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="show the progress line on standard error (what is being done, "
                             "how far, the time left) even when it is not a terminal; "
                             "--no-progress: never (default: on a terminal only)")


def seed_option(parser) -> None:
    """``--seed``: the command line fixes the seed (an estimator's default draws a fresh one)."""
    parser.add_argument("--seed", type=non_negative_int, default=CLI_SEED,
                        help="random seed, a non-negative integer (default: %(default)s)")


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0 (a seed), refused in one line otherwise."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


CLI_SEED = FIXED_SEED
"""The seed of every subcommand (a study's), so that a command repeated gives the same output."""


PANEL_COLUMNS = {
    "unit": "unit column",
    "time": "time / checkpoint column",
    "cohort": "cohort / treatment-step column, NaN or inf for never treated",
}
"""The panel's columns a subcommand reads; each defaults to its own name, the names that
didmem writes (``didmem lab``, ``didmem run``, :func:`didmem.datasets.simulate_panel`)."""


def panel_column_options(parser) -> None:
    """``--unit``, ``--time`` and ``--cohort``: the columns of a panel file."""
    for column, what in PANEL_COLUMNS.items():
        parser.add_argument(f"--{column}", default=column, help=f"{what} (default: %(default)s)")


def read_panel_frame(path, option: str | None = None, what: str = "panel file"):
    """The long table in a ``.csv`` or ``.parquet`` file, or a one-line error.

    ``option`` names the command-line option that gave the path (``--truth``, ``--pilot``) and
    ``what`` the kind of file; both go into every message, so that a user who passed an empty
    or wrong value sees which option to correct.
    """
    import pandas as pd
    from pathlib import Path

    where = f" ({option})" if option else ""
    if not str(path).strip():
        raise ParameterError(f"No {what} given{where}: the value is empty; give a .csv or "
                             f".parquet file.")
    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"No {what} at {str(path)!r}{where}.")
    if path.is_dir():
        raise ParameterError(f"The {what} {str(path)!r}{where} is a folder; give a .csv or "
                             f".parquet file.")
    if path.suffix not in (".csv", ".parquet"):
        raise ParameterError(f"A {what} must end in '.csv' or '.parquet'; got "
                             f"{str(path)!r}{where}.")
    try:
        return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        # pyarrow's ArrowInvalid is a ValueError; a truncated file gives an OSError
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise PanelError(f"Could not read the {what} {str(path)!r}{where} as "
                         f"{path.suffix[1:]}: {reason}") from None


def load_results(paths) -> list:
    """The results saved in each of ``paths``."""
    from ..results.saving import load_result

    return [load_result(p) for p in paths]


def use_agg_backend() -> None:
    """Draw without a display (matplotlib's Agg backend); needs the 'plot' extra."""
    optional_import("matplotlib", "plot").use("Agg")


def parse_labels(text: str | None, paths) -> list | None:
    """``--labels a,b,c``: one distinct, non-empty name per results file (None when not given)."""
    if text is None:
        return None
    labels = [x.strip() for x in text.split(",")]
    if len(labels) != len(paths) or not all(labels):
        raise ParameterError(f"--labels needs one non-empty name per results file, "
                             f"comma-separated: {len(paths)} files, got {text!r}.")
    if len(set(labels)) < len(labels):
        raise ParameterError(f"--labels names two results alike: {text!r}.")
    return labels


def result_names(paths) -> list:
    """Short names of results files: their stems, or their paths where two stems are alike."""
    from pathlib import Path

    stems = [Path(p).stem for p in paths]
    return stems if len(set(stems)) == len(stems) else [str(p) for p in paths]
