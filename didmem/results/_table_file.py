"""Results saved as one table plus their settings (a sensitivity analysis, a power analysis).

This module imports nothing heavy, so the analyses that subclass :class:`TableFile` stay
cheap to import (their command-line parsers read their declarations); :func:`write_table`
loads pandas and pyarrow when a file is written.
"""

from __future__ import annotations

from pathlib import Path


class TableFile:
    """A result written as one parquet table with its settings in the file's metadata.

    A subclass names its ``kind`` (``FILE_KIND``, the ``kind`` in the metadata that
    :func:`didmem.load_result` dispatches on; list it in ``results.saving._TABLE_KINDS``),
    says what its table and settings are (:meth:`_file_contents`) and rebuilds itself from
    them (:meth:`_from_file`).
    """

    FILE_KIND = ""
    FILE_WHAT = ""  # the result in words, for messages ("power analysis")

    def _file_contents(self):
        """``(frame, settings)``: the table to write and the JSON-able settings beside it."""
        raise NotImplementedError

    @classmethod
    def _from_file(cls, frame, settings: dict):
        """The result from the table and settings :meth:`_file_contents` gave."""
        raise NotImplementedError

    def save(self, path) -> Path:
        """Write the table and settings to a parquet file that :func:`didmem.load_result`
        reads back.

        Parameters
        ----------
        path : str or Path
            The file to write; its name must end in ``.parquet``.

        Returns
        -------
        Path
        """
        from .saving import write_table

        frame, settings = self._file_contents()
        return write_table(frame, {"kind": self.FILE_KIND, **settings}, path, self.FILE_WHAT)
