import os
import socket

import pytest


@pytest.fixture(autouse=True)
def no_network_when_offline(monkeypatch):
    """With HF_HUB_OFFLINE=1 (CI), any attempt to open a network connection fails the test."""
    if os.environ.get("HF_HUB_OFFLINE") not in ("1", "true", "True", "ON", "YES"):
        return
    real_connect = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise AssertionError(f"network access from an offline test: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
