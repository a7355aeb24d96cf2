"""A slow network link in front of a broker: a TCP relay that passes what the broker
sends at a fixed rate, as a cross-region link does for a mirror in the sink region
reading a distant source.

The broker advertises the relay's address (``advertised.listeners``), so every
client that learns the cluster from its metadata goes through the relay too.
Requests (client -> broker) pass at full speed; responses share one byte budget
per second (a token bucket), whatever the number of connections.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable

from mm.embedded import procs


class SlowLink:
    """Listens on ``port`` (free, chosen here) and relays to ``127.0.0.1:<upstream()>``
    once :attr:`upstream` is set (a callable: a broker's port can change while it
    starts); broker -> client bytes at ``rate`` bytes/s."""

    def __init__(self, rate: int, chunk: int = 16_384) -> None:
        self.rate, self.chunk = rate, chunk
        self.upstream: Callable[[], int] | None = None
        self.port = procs.free_port()
        self.relayed = 0  # broker -> client bytes so far
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._server.settimeout(0.2)
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._allowance = 0.0
        self._last = time.monotonic()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="slow-link").start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self.upstream is None:
                client.close()  # the broker is not there yet: as a refused connection
                continue
            try:
                broker = socket.create_connection(("127.0.0.1", self.upstream()), timeout=10)
            except OSError:
                client.close()
                continue
            broker.settimeout(None)
            self._sockets += [client, broker]
            threading.Thread(target=self._pipe, args=(client, broker, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(broker, client, True), daemon=True).start()

    def _take(self, n: int) -> None:
        """Waits until ``n`` more bytes fit the link's rate."""
        while True:
            with self._lock:
                now = time.monotonic()
                # at most a tenth of a second's bytes saved up: a steady rate, no bursts
                self._allowance = min(
                    self._allowance + (now - self._last) * self.rate,
                    max(self.rate / 10, self.chunk),
                )
                self._last = now
                if self._allowance >= n:
                    self._allowance -= n
                    self.relayed += n
                    return
                wait = (n - self._allowance) / self.rate
            time.sleep(min(wait, 0.05))

    def _pipe(self, src: socket.socket, dst: socket.socket, slow: bool) -> None:
        try:
            while True:
                data = src.recv(self.chunk)
                if not data:
                    break
                if slow:
                    self._take(len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self._server.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()
