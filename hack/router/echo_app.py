"""A tiny upstream for router tests, standard library only.

HTTP: answers every request with JSON `{"method", "path", "headers"}` (headers as a list of
[name, value] pairs, in the order received, so a test sees duplicates and what the router
added or removed). Keep-alive is honoured, as a router reuses its upstream connections.

WebSocket: completes the RFC 6455 handshake and echoes every text or binary message back,
prefixed with "echo: ", answers pings and closes cleanly.

    python hack/router/echo_app.py --host 127.0.0.1 --port 18090
"""

import argparse
import asyncio
import base64
import hashlib
import json
import struct

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


async def read_head(reader):
    """Request line and headers, or None when the client closed the connection."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = raw.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers = [tuple(s.strip() for s in line.split(":", 1)) for line in lines[1:] if line]
    return method, target, headers


def header(headers, name):
    return next((v for k, v in headers if k.lower() == name.lower()), "")


async def read_body(reader, headers):
    if "chunked" in header(headers, "Transfer-Encoding").lower():
        body = b""
        while size := int((await reader.readline()).split(b";")[0], 16):
            body += await reader.readexactly(size)
            await reader.readline()
        await reader.readline()
        return body
    return await reader.readexactly(int(header(headers, "Content-Length") or 0))


def respond(writer, status, headers, body=b""):
    lines = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers)]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)


async def serve_http(reader, writer, method, target, headers):
    body = await read_body(reader, headers)
    payload = {"method": method, "path": target, "headers": headers, "body_bytes": len(body)}
    data = json.dumps(payload, indent=1).encode()
    respond(
        writer,
        "200 OK",
        [("Content-Type", "application/json"), ("Content-Length", len(data))],
        data,
    )
    await writer.drain()


async def read_frame(reader):
    first, second = await reader.readexactly(2)
    opcode, masked, length = first & 0x0F, second & 0x80, second & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", await reader.readexactly(2))
    elif length == 127:
        (length,) = struct.unpack("!Q", await reader.readexactly(8))
    mask = await reader.readexactly(4) if masked else b"\0\0\0\0"
    data = await reader.readexactly(length)
    return opcode, bytes(b ^ mask[i % 4] for i, b in enumerate(data))


def frame(opcode, data):
    """A server frame: final, unmasked (servers never mask)."""
    n = len(data)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + data


async def serve_websocket(reader, writer, headers):
    key = header(headers, "Sec-WebSocket-Key")
    # RFC 6455 fixes SHA-1 here; it proves the server read the key, it protects nothing.
    digest = hashlib.sha1((key + WS_GUID).encode(), usedforsecurity=False).digest()
    accept = base64.b64encode(digest).decode()
    respond(
        writer,
        "101 Switching Protocols",
        [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", accept)],
    )
    await writer.drain()
    while True:
        opcode, data = await read_frame(reader)
        if opcode == 0x8:  # close: answer with the same code and stop
            writer.write(frame(0x8, data[:2]))
            break
        if opcode == 0x9:  # ping
            writer.write(frame(0xA, data))
        elif opcode in (0x1, 0x2):
            writer.write(frame(opcode, b"echo: " + data))
        await writer.drain()


async def handle(reader, writer):
    try:
        while head := await read_head(reader):
            method, target, headers = head
            if "websocket" in header(headers, "Upgrade").lower():
                await serve_websocket(reader, writer, headers)
                break
            await serve_http(reader, writer, method, target, headers)
            if header(headers, "Connection").lower() == "close":
                break
    except (asyncio.IncompleteReadError, ConnectionError, ValueError):
        pass
    finally:
        writer.close()


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18090)
    args = parser.parse_args()
    server = await asyncio.start_server(handle, args.host, args.port)
    print(f"echo app on {args.host}:{args.port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
