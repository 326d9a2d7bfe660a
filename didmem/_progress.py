"""Progress of the calls that take more than a few seconds, on a terminal.

A call that can run for long (sensitivity variants, simulated planning, the lab, scoring) takes
``progress=None`` and opens :func:`progress` around its loop. The line goes to standard error:
by default only when standard error is a terminal (tests, logs and pipes stay quiet), always
with ``progress=True``, never with ``False``. It says what the call is doing, how far it is, the
time spent and, once a step is done, about how long is left::

    sensitivity (relative magnitudes, bias negative): Mbar = 1.5 | 4/11 steps | 2.1 s, ~3.6 s left

On a terminal the line is redrawn in place (at most ten times a second), from ``DELAY`` seconds
on unless asked for (a call that ends sooner leaves the terminal as it was); elsewhere (when
asked) a line is written at the start, when the call says it does something new, at most every
``LOG_EVERY`` seconds besides, and at the end. One line
at a time: a call that runs inside another's progress (a sensitivity analysis inside a lab
run) stays quiet unless asked. No dependency: plain writes to ``sys.stderr``.
"""

from __future__ import annotations

import sys
import time

__all__ = ["progress", "wanted", "Progress"]

REDRAW_EVERY = 0.1  # seconds between redraws on a terminal
LOG_EVERY = 5.0  # seconds between lines when standard error is not a terminal
DELAY = 1.0  # seconds before the first line on a terminal, unless progress=True
_active = [0]  # progress lines open now (a nested call stays quiet unless asked)


def wanted(progress: bool | None) -> bool:
    """Show progress? ``True``/``False`` as given; ``None``: when standard error is a terminal
    and no other progress line is open."""
    if progress is not None:
        return bool(progress)
    return not _active[0] and _isatty()


def _seconds(s: float) -> str:
    if s < 60:
        return f"{s:.1f} s"
    minutes, sec = divmod(int(round(s)), 60)
    return f"{minutes} min {sec:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


class Progress:
    """One progress line: ``step(n)`` after each unit of work, ``say(text)`` for what is being
    done now; a context manager that writes the closing line (the total time) on exit."""

    def __init__(self, total: int | None, title: str, unit: str = "steps",
                 delay: float = 0.0) -> None:
        self.total, self.title, self.unit = total, title, unit
        self.done, self.doing = 0, ""
        self.start = time.perf_counter()
        self._drawn = None  # when the line was last written (None: not yet)
        self._delay = delay
        self._tty = _isatty()
        self._width = 0
        _active[0] += 1
        self._open = True
        self._draw()

    def step(self, n: int = 1) -> None:
        """``n`` more units of work done."""
        self.done += n
        self._draw()

    def say(self, text: str) -> None:
        """What the call is doing now (shown after the title; off a terminal, a new line)."""
        changed = str(text) != self.doing
        self.doing = str(text)
        self._draw(now=changed and not self._tty)

    update = step  # the names of tqdm's bar, for code written against it
    set_description = say

    def line(self, final: bool = False) -> str:
        elapsed = time.perf_counter() - self.start
        parts = [self.title + (f": {self.doing}" if self.doing and not final else "")]
        if self.total:
            parts.append(f"{self.done}/{self.total} {self.unit}")
        elif self.done:
            parts.append(f"{self.done} {self.unit}")
        if final:
            parts.append(f"done in {_seconds(elapsed)}")
        else:
            timing = _seconds(elapsed)
            if self.total and 0 < self.done < self.total:
                timing += f", ~{_seconds(elapsed / self.done * (self.total - self.done))} left"
            parts.append(timing)
        return " | ".join(parts)

    def _draw(self, final: bool = False, now: bool = False) -> None:
        clock = time.perf_counter()
        if self._drawn is None:
            if clock - self.start < self._delay:
                return  # not yet, and a call that ends before its first line writes none
        elif not (final or now) and clock - self._drawn < (REDRAW_EVERY if self._tty
                                                            else LOG_EVERY):
            return
        self._drawn = clock
        text = self.line(final)
        stream = sys.stderr
        try:
            if self._tty:
                pad = max(self._width - len(text), 0)
                stream.write("\r" + text + " " * pad + ("\n" if final else ""))
                self._width = len(text)
            else:
                stream.write(text + "\n")
            stream.flush()
        except (ValueError, OSError):  # a closed stream: progress is never worth an error
            pass

    def close(self) -> None:
        if self._open:
            self._open = False
            _active[0] -= 1
            self._draw(final=True)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Quiet:
    """The progress line nobody sees: every method does nothing."""

    total = done = 0

    def step(self, n: int = 1) -> None:
        pass

    def say(self, text: str) -> None:
        pass

    update, set_description = step, say

    def close(self) -> None:
        pass

    def __enter__(self) -> "_Quiet":
        return self

    def __exit__(self, *exc) -> None:
        pass


def _isatty() -> bool:
    """Is standard error a terminal? (False for a closed or detached stream)"""
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (ValueError, OSError):
        return False


def progress(total: int | None, title: str, enabled: bool | None = None,
             unit: str = "steps") -> Progress | _Quiet:
    """A progress line for ``total`` units of work (``None``: not known) titled ``title``, or
    one that shows nothing when ``enabled`` (the caller's ``progress`` argument) says so (see
    :func:`wanted`). Shown by default (``None``, on a terminal) from ``DELAY`` seconds on; at
    once when asked (``True``)."""
    if not wanted(enabled):
        return _Quiet()
    return Progress(total, title, unit, delay=0.0 if enabled else DELAY)
