"""A TCP proxy in front of an S3 endpoint that adds a fixed latency to every HTTP request and counts
the requests, as an object store across a network would: ``run.py --s3 --latency-ms 30`` starts one
per measured operation.

    python benches/scale/latency_proxy.py --listen 0 --to 127.0.0.1:8333 --latency-ms 30

Each request's first bytes wait ``--latency-ms`` before they are forwarded (the round trip a
request costs before its answer starts); answers flow back as they come. Prints ``listening`` once
ready (with its port) and, on SIGTERM or SIGINT, one JSON line: the requests by method and the bytes each way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections import Counter

METHODS = (b"GET ", b"PUT ", b"HEAD", b"POST", b"DELE")

requests: Counter[str] = Counter()
moved = {"up": 0, "down": 0}


async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, latency: float, upstream: bool) -> None:
    try:
        while data := await reader.read(1 << 16):
            if upstream:
                moved["up"] += len(data)
                if data[:4] in METHODS:
                    requests[data.split(b" ", 1)[0].decode()] += 1
                    await asyncio.sleep(latency)
            else:
                moved["down"] += len(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionResetError, BrokenPipeError):
        pass
    finally:
        writer.close()


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", type=int, default=0, help="port on 127.0.0.1 (0: a free one)")
    p.add_argument("--to", required=True, help="host:port of the S3 endpoint")
    p.add_argument("--latency-ms", type=float, default=30.0)
    args = p.parse_args()
    host, port = args.to.rsplit(":", 1)
    latency = args.latency_ms / 1000

    async def serve(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(host, int(port))
        await asyncio.gather(forward(client_r, server_w, latency, True), forward(server_r, client_w, latency, False))

    server = await asyncio.start_server(serve, "127.0.0.1", args.listen)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await stop.wait()
    print(json.dumps({"requests": sum(requests.values()), "by_method": dict(requests), "bytes_up": moved["up"], "bytes_down": moved["down"]}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
