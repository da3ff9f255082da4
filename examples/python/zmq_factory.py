"""A jaccl side channel over ZeroMQ: rank 0 is a ROUTER, the others DEALERs.

    jaccl-run -n 4 -- python3 examples/python/zmq_factory.py tcp://10.0.0.1:5999

Each call, every other rank sends (call number, its bytes) to rank 0; once
rank 0 has them all it replies to each with the concatenation in rank order.
Only rank 0 listens, on an address of your choosing (tcp://, ipc://); useful
when your job already runs a ZeroMQ control plane.
"""
import os
import struct

import zmq


class ZmqAllGather:
    """f(src, n_bytes) -> bytes for one rank; close() (or GC) ends it."""

    def __init__(self, address, rank, size, timeout):
        self.rank, self.size, self.call = rank, size, 0
        self.timeout_ms = int(timeout * 1000)
        self.ctx = zmq.Context()
        if rank == 0:
            self.sock = self.ctx.socket(zmq.ROUTER)
            self.sock.bind(address)
        else:
            self.sock = self.ctx.socket(zmq.DEALER)
            self.sock.setsockopt(zmq.IDENTITY, struct.pack("!i", rank))
            self.sock.connect(address)
        self.sock.setsockopt(zmq.LINGER, 2000)  # deliver the last replies

    def _recv(self, what):
        if not self.sock.poll(self.timeout_ms, zmq.POLLIN):
            raise TimeoutError(f"rank {self.rank}: no {what} within "
                               f"{self.timeout_ms / 1000:g} s")
        return self.sock.recv_multipart()

    def __call__(self, src, n_bytes):
        call = struct.pack("!q", self.call)
        self.call += 1
        if self.rank != 0:
            self.sock.send_multipart([call, src])
            got_call, data = self._recv("reply from rank 0")
            assert got_call == call, "out of step with rank 0"
            return data
        parts = {0: src}
        while len(parts) < self.size:
            ident, got_call, data = self._recv("message from every rank")
            peer = struct.unpack("!i", ident)[0]
            assert got_call == call, f"rank {peer} is out of step"
            parts[peer] = data
        everything = b"".join(parts[r] for r in range(self.size))
        for r in range(1, self.size):
            self.sock.send_multipart([struct.pack("!i", r), call, everything])
        return everything

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.ctx.term()
            self.sock = None

    def __del__(self):
        self.close()


def zmq_factory(address, timeout=None):
    """Returns an all_gather_factory for jaccl.init using `address`."""
    if timeout is None:
        timeout = float(os.environ.get("JACCL_TIMEOUT", "60"))
    return lambda rank, size: ZmqAllGather(address, rank, size, timeout)


if __name__ == "__main__":
    import sys

    import numpy as np

    import jaccl

    address = sys.argv[1] if len(sys.argv) > 1 else "tcp://127.0.0.1:5999"
    group = jaccl.init(strict=True, all_gather_factory=zmq_factory(address))
    y = jaccl.all_sum(np.full(4, group.rank() + 1, dtype=np.float32))
    expected = group.size() * (group.size() + 1) / 2
    assert (y == expected).all(), y
    print(f"rank {group.rank()}/{group.size()}: all_sum over "
          f"{group.backend_name} via {address}: OK")
