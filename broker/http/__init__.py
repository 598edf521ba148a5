"""The HTTP listener: the JSON management API and `/metrics`, served from the broker's own
asyncio loop. It calls `broker.management`, never the core's internals."""
