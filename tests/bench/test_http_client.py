"""The load benchmark's lean HTTP client: keep-alive, whole answers, no silent misreads."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from apps.bench.http_client import Answer, KeepAliveClient, ProtocolError

Reply = Callable[[bytes], bytes]


def _sized(body: bytes) -> bytes:
    return b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\nX-Echo: yes\r\n\r\n%s" % (
        len(body),
        body,
    )


def _chunked(_: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"


async def _serve(
    reply: Reply, calls: Callable[[KeepAliveClient], Awaitable[Any]]
) -> tuple[Any, int]:
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                writer.write(reply(await reader.readexactly(length)))
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = KeepAliveClient(f"http://127.0.0.1:{port}", {"Authorization": "Bearer t"})
    try:
        result = await calls(client)
    finally:
        await client.aclose()
        server.close()
    return result, len(connections)


def test_answers_are_read_whole_on_one_kept_connection() -> None:
    async def calls(client: KeepAliveClient) -> list[Answer]:
        return [await client.post("/v1/x", {"i": i}) for i in range(3)]

    answers, connections = asyncio.run(_serve(_sized, calls))
    assert connections == 1
    assert [(a.status_code, a.headers["x-echo"], a.json()) for a in answers] == [
        (201, "yes", {"i": i}) for i in range(3)
    ]


def test_an_answer_it_cannot_read_is_an_error_not_a_guess() -> None:
    async def calls(client: KeepAliveClient) -> object:
        return await client.post("/v1/x", {})

    with pytest.raises(ProtocolError, match="Content-Length"):
        asyncio.run(_serve(_chunked, calls))

    async def nobody() -> object:
        client = KeepAliveClient("http://127.0.0.1:9", {})
        return await client.post("/v1/x", {})

    with pytest.raises(ProtocolError):
        asyncio.run(nobody())
