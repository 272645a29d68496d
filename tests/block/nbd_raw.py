#!/usr/bin/python3
"""Bad input for vsld's NBD server, byte by byte (no client library would send it).

  nbd_raw.py SOCKET EXPORT

Each case opens its own connection and checks the server's answer: the protocol's error
where there is one, otherwise a clean close. Exit 0 when every case behaves.
"""
import socket
import struct
import sys

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REPMAGIC = 0x0003E889045565A9
REQMAGIC = 0x25609513
SIMPLE = 0x67446698
ERR = 1 << 31
ERR_UNSUP, ERR_INVALID, ERR_UNKNOWN, ERR_TOO_BIG = ERR | 1, ERR | 3, ERR | 6, ERR | 9

path, export = sys.argv[1], sys.argv[2].encode()
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("  FAILED:", what)


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(path)
    return s


def recvall(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("closed after %d of %d bytes" % (len(b), n))
        b += c
    return b


def closed(s):
    try:
        return s.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def greet(s, flags=3):
    magic, opt, hflags = struct.unpack(">QQH", recvall(s, 18))
    assert magic == NBDMAGIC and opt == IHAVEOPT, "bad greeting"
    s.sendall(struct.pack(">I", flags))
    return hflags


def send_opt(s, opt, data=b"", magic=IHAVEOPT):
    s.sendall(struct.pack(">QII", magic, opt, len(data)) + data)


def read_rep(s):
    magic, opt, typ, ln = struct.unpack(">QIII", recvall(s, 20))
    assert magic == REPMAGIC, "bad reply magic"
    return opt, typ, recvall(s, ln)


def go(s, name=export):
    send_opt(s, 7, struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
    size = None
    while True:
        opt, typ, data = read_rep(s)
        if typ == 3 and struct.unpack(">H", data[:2])[0] == 0:
            size = struct.unpack(">Q", data[2:10])[0]
        if typ == 1:
            return size
        if typ & ERR:
            raise RuntimeError("GO refused: %x %r" % (typ, data))


def request(s, typ, offset, length, handle=1, flags=0, payload=b""):
    s.sendall(struct.pack(">IHHQQI", REQMAGIC, flags, typ, handle, offset, length) + payload)


def simple_reply(s):
    magic, err, handle = struct.unpack(">IIQ", recvall(s, 16))
    assert magic == SIMPLE, "bad simple reply magic %x" % magic
    return err, handle


def case(name):
    print("case:", name)


case("bad client flags close the connection")
s = connect(); greet(s, flags=0x80)
check(closed(s), "unknown client flags: connection not closed")

case("bad option magic closes")
s = connect(); greet(s); send_opt(s, 7, b"", magic=0x1234)
check(closed(s), "bad option magic: not closed")

case("unknown option -> ERR_UNSUP, connection goes on")
s = connect(); greet(s); send_opt(s, 99, b"abc")
check(read_rep(s)[1] == ERR_UNSUP, "unknown option not ERR_UNSUP")
send_opt(s, 3)
names = []
while True:
    opt, typ, data = read_rep(s)
    if typ == 1:
        break
    n = struct.unpack(">I", data[:4])[0]
    names.append(data[4:4 + n])
check(export in names, "LIST after an unknown option does not list %r: %r" % (export, names))

case("LIST with data -> ERR_INVALID")
s = connect(); greet(s); send_opt(s, 3, b"x")
check(read_rep(s)[1] == ERR_INVALID, "LIST with data not ERR_INVALID")

case("STARTTLS without TLS configured -> ERR_UNSUP")
s = connect(); greet(s); send_opt(s, 5)
check(read_rep(s)[1] == ERR_UNSUP, "STARTTLS not ERR_UNSUP")

case("option too long -> ERR_TOO_BIG (skipped), then GO works")
s = connect(); greet(s); send_opt(s, 6, b"\0" * (200 * 1024))
check(read_rep(s)[1] == ERR_TOO_BIG, "long option not ERR_TOO_BIG")
check(go(s) > 0, "GO after a long option")

case("GO with inconsistent lengths -> ERR_INVALID")
s = connect(); greet(s)
send_opt(s, 7, struct.pack(">I", 1000) + b"lun0" + struct.pack(">H", 0))
check(read_rep(s)[1] == ERR_INVALID, "bad name length not ERR_INVALID")
send_opt(s, 7, struct.pack(">I", len(export)) + export + struct.pack(">H", 3) + b"\0\0")
check(read_rep(s)[1] == ERR_INVALID, "bad info count not ERR_INVALID")

case("GO on an unknown export -> ERR_UNKNOWN with a message")
s = connect(); greet(s)
send_opt(s, 7, struct.pack(">I", 7) + b"nothere" + struct.pack(">H", 0))
opt, typ, data = read_rep(s)
check(typ == ERR_UNKNOWN and b"nothere" in data, "unknown export: %x %r" % (typ, data))

case("EXPORT_NAME of an unknown export closes; of a known one gives size and flags")
s = connect(); greet(s); send_opt(s, 1, b"nothere")
check(closed(s), "EXPORT_NAME unknown: not closed")
s = connect(); greet(s, flags=1); send_opt(s, 1, export)
size, flags = struct.unpack(">QH", recvall(s, 10))
zeroes = recvall(s, 124)
check(size > 0 and flags & 1 and zeroes == b"\0" * 124, "EXPORT_NAME reply")
request(s, 0, 0, 4096, handle=7)
err, h = simple_reply(s)
check(err == 0 and h == 7, "read after EXPORT_NAME: err %d" % err)
recvall(s, 4096)

case("transmission: errors per request, the connection goes on")
s = connect(); greet(s); size = go(s)
for what, (typ, off, ln, fl), want in [
    ("misaligned read", (0, 100, 4096, 0), 22),
    ("read past the end", (0, size - 4096, 8192, 0), 22),
    ("offset overflow", (0, 2**64 - 4096, 8192, 0), 22),
    ("zero-length read", (0, 0, 0, 0), 22),
    ("read over the maximum", (0, 0, 64 << 20, 0), 22),
    ("unknown command", (42, 0, 4096, 0), 22),
    ("unknown flag", (0, 0, 4096, 0x100), 22),
    ("DF without structured replies", (0, 0, 4096, 4), 22),
    ("block status without a context", (7, 0, 4096, 0), 22),
    ("write-zeroes NO_HOLE|FAST_ZERO", (6, 0, 4096, 2 | 16), 95),
    ("misaligned write-zeroes", (6, 512, 4096, 0), 22),
]:
    request(s, typ, off, ln, handle=99, flags=fl)
    err, h = simple_reply(s)
    check(err == want and h == 99, "%s: error %d, want %d" % (what, err, want))
request(s, 1, 4096, 4096, handle=5, payload=b"\xab" * 4096)
check(simple_reply(s) == (0, 5), "write after errors")
request(s, 1, 100, 4096, handle=6, payload=b"\xcd" * 4096)  # misaligned: payload consumed
check(simple_reply(s) == (22, 6), "misaligned write not EINVAL")
request(s, 0, 4096, 4096, handle=8)
check(simple_reply(s) == (0, 8) and recvall(s, 4096) == b"\xab" * 4096, "read back after a misaligned write")
request(s, 4, 4096 + 100, 100, handle=9)  # trim inside one block: nothing to trim, OK
check(simple_reply(s) == (0, 9), "sub-block trim")
request(s, 0, 4096, 4096, handle=10)
check(simple_reply(s) == (0, 10) and recvall(s, 4096) == b"\xab" * 4096, "sub-block trim changed data")
request(s, 2, 0, 0)  # DISC
check(closed(s), "DISC: not closed")

case("bad request magic closes")
s = connect(); greet(s); go(s)
s.sendall(b"\0" * 28)
check(closed(s), "bad request magic: not closed")

case("oversize write payload: error, then close")
s = connect(); greet(s); go(s)
request(s, 1, 0, 64 << 20, handle=3)
err, h = simple_reply(s)
check(err == 22 and h == 3, "oversize write error %d" % err)
check(closed(s), "oversize write: not closed")

case("disconnect in the middle of a write payload")
s = connect(); greet(s); go(s)
request(s, 1, 8192, 65536, handle=4, payload=b"\xee" * 1000)
s.close()

case("data written before the bad inputs is intact")
s = connect(); greet(s); go(s)
request(s, 0, 4096, 8192, handle=11)
check(simple_reply(s) == (0, 11), "final read")
data = recvall(s, 8192)
check(data[:4096] == b"\xab" * 4096, "block 1 changed")
check(data[4096:] != b"\xee" * 4096, "a partial payload was applied")

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
