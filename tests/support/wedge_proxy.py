"""A TCP proxy in front of a test broker that can wedge a client's group-coordinator connection.

The broker advertises the proxy's address, so every client connection passes through it.
``wedge()`` freezes the connections that have carried an OffsetFetch request (what
``Consumer.committed()`` sends to the group coordinator): from then on nothing is forwarded on
them either way, and the client's requests go unanswered until librdkafka gives the connection up
(``socket.timeout.ms``, 60 s by default). Connections opened later pass. That is the fault seen in
a torture run after a broker restart: one consumer's ``committed()`` timed out for minutes while a
new consumer of the same group was answered at once.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading

OFFSET_FETCH = 9  # Kafka API key


class _Link:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client, self.upstream = client, upstream
        self.fetches_offsets = False
        self.frozen = threading.Event()

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.close()


class WedgeProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target`` (set before the first connection)."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self.target: int | None = None
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.wedged = 0
        threading.Thread(target=self._accept, name="wedge-proxy", daemon=True).start()

    def wedge(self) -> int:
        """Freeze every connection that has fetched committed offsets so far; returns how many."""
        with self._lock:
            links = [link for link in self._links if link.fetches_offsets and not link.frozen.is_set()]
            for link in links:
                link.frozen.set()
            self.wedged += len(links)
        return len(links)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            for link in self._links:
                link.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                upstream.settimeout(None)
            except (OSError, TypeError):  # broker down (restarting): the client retries
                client.close()
                continue
            link = _Link(client, upstream)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._requests, args=(link,), daemon=True).start()
            threading.Thread(target=self._pump, args=(link, upstream, client), daemon=True).start()

    def _requests(self, link: _Link) -> None:
        """Client to broker, noting the API key of each request frame (size, key, version, ...)."""
        pending = bytearray()
        while True:
            data = self._read(link, link.client)
            if not data:
                break
            pending += data
            while len(pending) >= 6:
                size, key = struct.unpack_from(">ih", pending, 0)
                if key == OFFSET_FETCH:
                    link.fetches_offsets = True
                if len(pending) < 4 + size:
                    break
                del pending[: 4 + size]
            if not self._forward(link, link.upstream, data):
                break
        link.close()

    def _pump(self, link: _Link, source: socket.socket, sink: socket.socket) -> None:
        while True:
            data = self._read(link, source)
            if not data or not self._forward(link, sink, data):
                break
        link.close()

    def _read(self, link: _Link, source: socket.socket) -> bytes:
        try:
            data = source.recv(65536)
        except OSError:
            return b""
        return self._hold(link, data)

    def _forward(self, link: _Link, sink: socket.socket, data: bytes) -> bool:
        try:
            sink.sendall(self._hold(link, data))
        except OSError:
            return False
        return True

    def _hold(self, link: _Link, data: bytes) -> bytes:
        """A frozen link forwards nothing more, ever: wait here until the proxy closes."""
        if link.frozen.is_set():
            self._closed.wait()
            return b""
        return data
