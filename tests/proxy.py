"""A TCP proxy on 127.0.0.1 for fault injection: forwards to a server, cuts on demand.

``Proxy(target_port)`` listens on a free port; ``cut()`` resets every open connection
(the client sees the connection drop mid-stream, as on a network failure) while new
connections keep working, so the client can reconnect.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading


class Proxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._closed = False
        self.connections = 0  # accepted so far
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
                self.connections += 1
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ, upstream)
        sel.register(upstream, selectors.EVENT_READ, client)
        try:
            while True:
                for key, _ in sel.select(timeout=1.0):
                    src: socket.socket = key.fileobj  # type: ignore[assignment]
                    dst: socket.socket = key.data
                    data = src.recv(65536)
                    if not data:
                        return
                    dst.sendall(data)
                if self._closed:
                    return
        except OSError:
            return
        finally:
            sel.close()
            self._close_pair(client, upstream)

    @staticmethod
    def _reset(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            # linger 0: close sends RST, like a network failure, not a clean FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            sock.close()

    def _close_pair(self, client: socket.socket, upstream: socket.socket) -> None:
        self._reset(client)
        self._reset(upstream)
        with self._lock:
            if (client, upstream) in self._pairs:
                self._pairs.remove((client, upstream))

    def cut(self) -> int:
        """Reset every open connection; returns how many were cut."""
        with self._lock:
            pairs = list(self._pairs)
        for client, upstream in pairs:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            self._close_pair(client, upstream)
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
