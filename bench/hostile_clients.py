"""Raw-socket HTTP clients, well-behaved and hostile, for the hardening tests and the abuse soak
(standard library only). Every call is bounded in time; every socket is closed."""
import json
import socket
import time


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def read_response(sock, timeout=30, pending=None):
    """One HTTP/1.1 response from `sock`: (status, headers dict (lowercase names), body bytes), or
    None when the connection closed first. Understands Content-Length and chunked bodies. For
    pipelined responses pass the same bytearray `pending` to each call: bytes read past one
    response are kept there for the next."""
    sock.settimeout(timeout)
    if pending is None:
        pending = bytearray()
    buf = bytes(pending)
    pending.clear()
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, v = line.split(":", 1)
        headers[k.strip().lower()] = v.strip()

    def need(n):
        nonlocal rest
        while len(rest) < n:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed mid-body")
            rest += chunk

    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            while b"\r\n" not in rest:
                need(len(rest) + 1)
            size_line, rest = rest.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            need(size + 2)
            body += rest[:size]
            rest = rest[size + 2:]
            if size == 0:
                pending.extend(rest)
                return status, headers, body
    length = int(headers.get("content-length", "0"))
    need(length)
    body, rest = rest[:length], rest[length:]
    pending.extend(rest)
    return status, headers, body


def request(port, method, path, body=None, headers=None, timeout=30):
    """One request on a fresh connection: (status, headers, body bytes)."""
    data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1", "Connection: close"]
    if body is not None:
        lines += ["Content-Type: application/json", "Content-Length: %d" % len(data)]
    lines += ["%s: %s" % kv for kv in (headers or {}).items()]
    with connect(port, timeout) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        return read_response(s, timeout)


def post_json(port, path, body, headers=None, timeout=30):
    status, _, raw = request(port, "POST", path, body, headers, timeout)
    return status, json.loads(raw) if raw else None


def trickle(port, payload, seconds_per_byte, give_up_after):
    """Sends `payload` one byte at a time (a slowloris client) until the server closes the
    connection or `give_up_after` seconds pass. Returns (seconds until closed or None, the status
    of any answer it got)."""
    start = time.time()
    status = None
    try:
        with connect(port, timeout=give_up_after) as s:
            for byte in payload:
                if time.time() - start > give_up_after:
                    return None, status
                s.sendall(bytes([byte]))
                s.settimeout(seconds_per_byte)
                try:
                    data = s.recv(4096)
                    if data.startswith(b"HTTP/1.1 "):
                        status = int(data.split()[1])
                    if not data or status is not None:
                        return time.time() - start, status
                except socket.timeout:
                    pass
    except (ConnectionError, OSError):
        return time.time() - start, status
    return None, status


def chunked_upload(port, path, total_bytes, chunk=1 << 16, timeout=60):
    """POSTs `total_bytes` of JSON-ish filler with Transfer-Encoding: chunked; returns the status
    the server answered (or None if it closed without one)."""
    with connect(port, timeout) as s:
        s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n" % path).encode())
        piece = b"%x\r\n" % chunk + b" " * chunk + b"\r\n"
        sent = 0
        try:
            while sent < total_bytes:
                s.sendall(piece)
                sent += chunk
            s.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            r = read_response(s, timeout)
        except (ConnectionError, OSError):
            return None
        return r[0] if r else None


def nested_text(depth):
    """`depth` nested lists as JSON text (json.dumps recurses, so build the text by hand)."""
    return "[" * depth + "]" * depth
