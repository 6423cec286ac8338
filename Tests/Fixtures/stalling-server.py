#!/usr/bin/env python3
"""An HTTP server on a free port of 127.0.0.1 that answers every request with a head that promises 500 bytes,
sends 9 of them and then nothing: a body that stalls. Prints its port, then `request N` for each request it
reads, and serves until its stdin closes (the test that started it holds the other end).
"""
import os
import socket
import sys
import threading

listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(listener.getsockname()[1], flush=True)
held = []
count = 0


def exit_when_stdin_closes() -> None:
    sys.stdin.buffer.read()
    os._exit(0)


threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
while True:
    connection, _ = listener.accept()
    held.append(connection)  # never closed: the stall lasts until the client gives up
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(4096)
        if not chunk:
            break
        data += chunk
    count += 1
    print(f"request {count}", flush=True)
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"access_")
