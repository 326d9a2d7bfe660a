"""Starting or joining Ray: a wrong address fails fast, naming it; Ray's notice that a local
cluster turned token authentication on by default is not printed.

Ray retries a connection to an address where no cluster answers for minutes before it gives
up. :func:`init_ray` first opens a TCP connection to the address's host and port (the head
node's GCS port, 6379 unless given; a ``ray://`` client's, 10001 unless given), bounded by
:data:`CONNECT_TIMEOUT` seconds, and raises a one-line :class:`ConnectionFailedError` when
nothing answers. ``"auto"`` and ``"local"`` are left to Ray (it resolves them at once).
"""

from __future__ import annotations

import contextlib
import logging
import socket

from ..errors import DidmemError

__all__ = ["init_ray", "ConnectionFailedError", "CONNECT_TIMEOUT", "address_endpoint"]

CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the address's host to accept a connection before giving up."""

GCS_PORT, CLIENT_PORT = 6379, 10001
"""Ray's default ports: the head node's GCS, and the Ray client server (``ray://``)."""

TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"
TOKEN_NOTICE = "Token authentication is enabled for this Ray cluster."
"""Ray's logger, and the start of its notice, that a local cluster enabled token
authentication by default: printed on every local start; its other messages are kept."""


class ConnectionFailedError(DidmemError, ConnectionError):
    """No Ray cluster answers at the address given."""


def address_endpoint(address: str) -> tuple[str, int] | None:
    """``(host, port)`` that ``address`` names, or None for one that Ray resolves itself
    (``"auto"``, ``"local"``)."""
    text = address.strip()
    if text.lower() in ("auto", "local", ""):
        return None
    port = GCS_PORT
    if text.startswith("ray://"):
        text, port = text[len("ray://"):], CLIENT_PORT
    text = text.split("/", 1)[0]
    if text.startswith("["):  # [IPv6]:port
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else port
    host, sep, tail = text.rpartition(":")
    if sep and tail.isdigit():
        return host, int(tail)
    return text, port


def _check_reachable(address: str, timeout: float) -> None:
    endpoint = address_endpoint(address)
    if endpoint is None:
        return
    host, port = endpoint
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else (
            exc.strerror or type(exc).__name__)
        raise ConnectionFailedError(
            f"No Ray cluster answers at the address {address!r} ({host}:{port}: {reason}, "
            f"waited at most {timeout:g} s). Check the address ('ray status' on the head node "
            "prints it; 'auto' joins the cluster this machine belongs to), start a cluster "
            "there with 'ray start --head', or leave the address out to start Ray on this "
            "machine.") from None


class _DropTokenNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(TOKEN_NOTICE)


@contextlib.contextmanager
def quiet_token_notice():
    """Ray's token-authentication notice dropped while the block runs (its other warnings,
    such as the one that authentication is off, are kept)."""
    logger, drop = logging.getLogger(TOKEN_LOGGER), _DropTokenNotice()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def init_ray(ray, address: str | None = None, *, timeout: float = CONNECT_TIMEOUT, **kwargs):
    """``ray.init(address=address, **kwargs)``, after checking that something answers at
    ``address`` (within ``timeout`` seconds), without Ray's token notice."""
    if address is not None:
        _check_reachable(address, timeout)
    with quiet_token_notice():
        try:
            return ray.init(address=address, **kwargs)
        except (ConnectionError, TimeoutError) as exc:
            if address is None:
                raise
            text = " ".join(str(exc).split()) or type(exc).__name__
            raise ConnectionFailedError(
                f"Ray could not join a cluster at the address {address!r} ({text}): something "
                "answers there, but not a Ray head node. Check the address ('ray status' on "
                "the head node prints it), or leave it out to start Ray on this machine."
            ) from None
