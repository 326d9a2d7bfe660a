"""Joining Ray at a wrong address fails fast in one line naming it, and a local start does not
print Ray's token-authentication notice (issue 50, item 5). No Ray cluster is started here: a
stand-in ``ray`` module records whether ``init`` was reached."""

from __future__ import annotations

import logging
import socket

import pytest

from didmem.runners import _ray_connect
from didmem.runners._ray_connect import (CLIENT_PORT, GCS_PORT, ConnectionFailedError,
                                         address_endpoint, init_ray)


class _FakeRay:
    def __init__(self, error=None):
        self.calls, self.error = [], error

    def init(self, **kwargs):
        logging.getLogger(_ray_connect.TOKEN_LOGGER).warning(
            "Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled "
            "to opt out.")
        logging.getLogger(_ray_connect.TOKEN_LOGGER).warning("Token authentication is disabled")
        self.calls.append(kwargs)
        if self.error is not None:
            raise self.error


@pytest.mark.parametrize("address, endpoint", [
    ("auto", None), ("local", None), ("10.0.0.5:6380", ("10.0.0.5", 6380)),
    ("head", ("head", GCS_PORT)), ("ray://head:10002", ("head", 10002)),
    ("ray://head", ("head", CLIENT_PORT)), ("[::1]:7000", ("::1", 7000)),
])
def test_the_address_names_its_host_and_port(address, endpoint):
    assert address_endpoint(address) == endpoint


def _closed_port() -> int:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_fails_before_ray_starts_in_one_line():
    ray = _FakeRay()
    address = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(ConnectionFailedError) as info:
        init_ray(ray, address, log_to_driver=False)
    assert ray.calls == []  # Ray's minutes of retries never begin
    text = str(info.value)
    assert f"No Ray cluster answers at the address {address!r}" in text and "\n" not in text
    assert "ray start --head" in text


def test_a_host_that_does_not_answer_is_given_up_after_the_timeout(monkeypatch):
    seen = {}

    def silent(endpoint, timeout):
        seen["timeout"] = timeout
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", silent)
    ray = _FakeRay()
    with pytest.raises(ConnectionFailedError, match=r"10.255.255.1:6379: no answer, waited at "
                                                    r"most 2 s"):
        init_ray(ray, "10.255.255.1", timeout=2.0)
    assert seen["timeout"] == 2.0 and ray.calls == []


def test_ray_refusing_the_connection_is_one_line_naming_the_address(monkeypatch):
    monkeypatch.setattr(_ray_connect, "_check_reachable", lambda address, timeout: None)
    ray = _FakeRay(ConnectionError("Failed to connect to\nRay cluster at 10.1.1.1:6379"))
    with pytest.raises(ConnectionFailedError) as info:
        init_ray(ray, "10.1.1.1:6379")
    assert "at the address '10.1.1.1:6379'" in str(info.value) and "\n" not in str(info.value)
    local = _FakeRay(ConnectionError("no local cluster"))
    with pytest.raises(ConnectionError, match="no local cluster"):  # not an address's fault
        init_ray(local, None)


def test_a_local_start_drops_the_token_notice_only(caplog):
    ray = _FakeRay()
    with caplog.at_level(logging.WARNING, logger=_ray_connect.TOKEN_LOGGER):
        init_ray(ray, None, log_to_driver=False)
    assert ray.calls == [{"address": None, "log_to_driver": False}]
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["Token authentication is disabled"]
    logging.getLogger(_ray_connect.TOKEN_LOGGER).warning(
        "Token authentication is enabled for this Ray cluster. Again.")
    assert caplog.records[-1].getMessage().endswith("Again.")  # the filter left with the call


def test_cli_folder_on_ray_at_a_closed_port_is_one_line(tmp_path, capsys):
    pytest.importorskip("ray")
    import didmem
    from didmem.cli import main

    df, _ = didmem.datasets.simulate_panel(n_cohorts=2, units_per_cohort=5, n_never_treated=10,
                                           seed=0)
    folder = tmp_path / "data"
    folder.mkdir()
    df.to_parquet(folder / "part.parquet")
    address = f"127.0.0.1:{_closed_port()}"
    assert main(["estimate", str(folder), "--outcome", "y", "--out", str(tmp_path / "r.parquet"),
                 "--runner", "ray", "--address", address]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"No Ray cluster answers at the address {address!r}" in err
