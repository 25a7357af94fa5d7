"""A lean HTTP/1.1 keep-alive client for the load benchmark, on asyncio streams.

`bench api` runs its clients on the machine that serves them. With httpx each request
cost the load generator about 1.8 ms of CPU (9 of the run's 60 core-seconds on two
cores), taken from the server it measures, and a busy client loop adds its own queueing
to every latency it records. This client does only what the benchmark needs: POST a
JSON body on one open connection, read the status line, the headers and a
`Content-Length` body, and keep the connection for the next request. Anything it does
not understand (a chunked or unsized answer, a closed connection) is a `ProtocolError`,
counted by the benchmark as a dropped connection, never passed over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlsplit


class ProtocolError(Exception):
    """The connection broke or the server's answer is not one this client reads."""


class Answer:
    """A response: its status, its headers (lower-case names) and its body."""

    __slots__ = ("body", "headers", "status_code")

    def __init__(self, status_code: int, headers: dict[str, str], body: bytes) -> None:
        self.status_code, self.headers, self.body = status_code, headers, body

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


class KeepAliveClient:
    """One persistent connection to `base_url`, one request at a time."""

    def __init__(self, base_url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        fixed = {"Host": f"{self.host}:{self.port}", **headers}
        self._head = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: Any) -> Answer:
        """POST `body` as JSON to `path` and read the whole answer."""
        data = json.dumps(body).encode()
        request = (
            f"POST {path} HTTP/1.1\r\n{self._head}Content-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode() + data
        try:
            if self._writer is None:
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
            assert self._reader is not None
            self._writer.write(request)
            return await self._closing(await self._answer(self._reader))
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            await self.aclose()
            raise ProtocolError(str(exc) or type(exc).__name__) from exc
        except ProtocolError:
            await self.aclose()
            raise

    @staticmethod
    async def _answer(reader: asyncio.StreamReader) -> Answer:
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
            raise ProtocolError(f"not an HTTP/1.x status line: {status_line!r}")
        headers = {}
        for line in lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise ProtocolError("an answer without Content-Length")
        body = await reader.readexactly(int(headers["content-length"]))
        return Answer(int(parts[1]), headers, body)

    async def _closing(self, answer: Answer) -> Answer:
        if answer.headers.get("connection", "").lower() == "close":
            await self.aclose()
        return answer

    async def aclose(self) -> None:
        """Close the connection (the next request opens a new one)."""
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
