#!/usr/bin/python3
"""Exact acknowledged-write checker for crash tests, on libnbd (the client is not ours).

  nbd_crash_check.py write URI STATE SEED   writes until the connection dies, then saves
                                            what was acknowledged and what was in flight
  nbd_crash_check.py verify URI STATE       every acknowledged block must hold its last
                                            acknowledged version, intact; a block with a
                                            write in flight at the crash may hold that one
                                            instead; a block never written reads as zeroes

Each 4 KiB block written carries (magic, seed, block, generation) and a filler derived
from them, so a torn, stale or foreign block is told apart from the right one. At most
16 writes are in flight, never two on the same block.
"""
import json
import random
import struct
import sys

import nbd

MAGIC = 0x4F56534C43524153  # "OVSLCRAS"
BS = 4096


def block_data(seed, block, gen):
    head = struct.pack(">QQQQ", MAGIC, seed, block, gen)
    fill = random.Random((seed << 40) ^ (block << 20) ^ gen).randbytes(BS - len(head))
    return head + fill


CLASSES = ("bit_corruption", "shorn_writes", "flying_writes", "unserializable_writes")


def classify(seed, b, got, ok):
    """The power-fault literature's class of a wrong block (tests/testutil/campaign.h)."""
    magic, s, blk, g = struct.unpack(">QQQQ", got[:32])
    if got == bytes(BS) or (magic == MAGIC and s == seed and blk == b and g not in ok
                            and got == block_data(seed, b, g)):
        return "unserializable_writes"  # zeroes or an older generation, intact
    if magic == MAGIC and s == seed and blk != b and got == block_data(seed, blk, g):
        return "flying_writes"  # another block's write, intact
    # Every 512-byte piece from an allowed generation or zeroes, not all from one.
    versions = [bytes(BS)] + [block_data(seed, b, v) for v in ok if v]
    if all(any(got[o:o + 512] == v[o:o + 512] for v in versions) for o in range(0, BS, 512)):
        return "shorn_writes"
    return "bit_corruption"


def write(uri, state, seed):
    h = nbd.NBD()
    h.connect_uri(uri)
    blocks = min(h.get_size() // BS, 1 << 16)
    rng = random.Random(seed)
    acked, inflight, busy = {}, {}, set()
    gen = 0
    try:
        while True:
            while len(inflight) < 16:
                b = rng.randrange(blocks)
                if b in busy:
                    continue
                gen += 1
                buf = nbd.Buffer.from_bytearray(bytearray(block_data(seed, b, gen)))
                cookie = h.aio_pwrite(buf, b * BS)
                inflight[cookie] = (b, gen, buf)
                busy.add(b)
            h.poll(-1)
            for cookie in list(inflight):
                if h.aio_command_completed(cookie):
                    b, g, _ = inflight.pop(cookie)
                    busy.discard(b)
                    acked[b] = g
    except nbd.Error:
        pass  # the server went away
    pending = {b: g for (b, g, _) in inflight.values()}
    json.dump({"seed": seed, "acked": acked, "pending": pending}, open(state, "w"))
    print("written: %d blocks acknowledged (%d writes), %d in flight" % (len(acked), gen - len(pending), len(pending)))


def verify(uri, state):
    s = json.load(open(state))
    seed = s["seed"]
    acked = {int(k): v for k, v in s["acked"].items()}
    pending = {int(k): v for k, v in s["pending"].items()}
    h = nbd.NBD()
    h.connect_uri(uri)
    # Reads 64 at a time (aio), checked as they come back.
    lost, landed = [], 0
    classes = {k: 0 for k in CLASSES}
    todo = sorted(set(acked) | set(pending))
    reads = {}
    i = 0
    while i < len(todo) or reads:
        while i < len(todo) and len(reads) < 64:
            buf = nbd.Buffer(BS)
            reads[h.aio_pread(buf, todo[i] * BS)] = (todo[i], buf)
            i += 1
        h.poll(-1)
        for cookie in list(reads):
            if not h.aio_command_completed(cookie):
                continue
            b, buf = reads.pop(cookie)
            got = bytes(buf.to_bytearray())
            ok = set()
            if b in acked:
                ok.add(acked[b])
            if b in pending:
                ok.add(pending[b])
            if b not in acked:
                ok.add(0)  # never acknowledged: zeroes are right too
            g = 0 if got == bytes(BS) else struct.unpack(">QQQQ", got[:32])[3]
            if g not in ok or (g != 0 and got != block_data(seed, b, g)):
                lost.append((b, g, sorted(ok)))
                classes[classify(seed, b, got, ok)] += 1
            elif b in pending and g == pending[b]:
                landed += 1
    print("verified: %d acknowledged blocks exact, %d of %d in-flight writes landed, %d wrong"
          % (len(acked) - len([x for x in lost if x[0] in acked]), landed, len(pending), len(lost)))
    print("classes " + json.dumps(classes))
    if lost:
        print("WRONG (block, generation read, generations allowed):", lost[:20])
        sys.exit(1)


if sys.argv[1] == "write":
    write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
else:
    verify(sys.argv[2], sys.argv[3])
