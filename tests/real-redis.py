#!/usr/bin/python3
"""real-redis.py: a tiny RESP client for tests/real-redis.sh (no redis-py needed).

    real-redis.py PORT wait            until PING answers PONG (10 s at most)
    real-redis.py PORT load            writes the known data set (deterministic)
    real-redis.py PORT verify          reads every known key back and compares exactly;
                                      prints "verified N keys" or the first mismatches
    real-redis.py PORT digest          DEBUG DIGEST-VALUE of every known key, one line
    real-redis.py PORT cmd ARG...      one command, prints the reply

The known data: 2000 strings (1 B to 64 KiB, a few of 1-3 MiB), 100 lists, 100 hashes,
100 sets, 50 sorted sets, all under the prefix "known:" (redis-benchmark's keys never
start with it). Exit status 0 on success, 1 on a mismatch, 2 on a protocol/connection
error."""
import hashlib
import socket
import sys
import time


class Redis:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.f = self.s.makefile("rb")

    def send(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            if not isinstance(a, bytes):
                a = str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))

    def reply(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("connection closed")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RuntimeError("redis error: " + rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("bad reply %r" % line)

    def cmd(self, *args):
        self.send(*args)
        return self.reply()

    def pipeline(self, cmds):
        for c in cmds:
            self.send(*c)
        return [self.reply() for _ in cmds]


def value(i):
    """Deterministic content of known:str:i."""
    if i % 500 == 7:
        n = (1 + i % 3) * 1024 * 1024 + i  # 1-3 MiB: large blocks
    else:
        n = 1 + (i * 7919) % 65536 if i % 4 == 0 else 1 + (i * 31) % 300
    seed = hashlib.sha256(b"known%d" % i).digest()
    return (seed * (n // len(seed) + 1))[:n]


def dataset():
    cmds, expect = [], []
    for i in range(2000):
        k = b"known:str:%d" % i
        cmds.append((b"SET", k, value(i)))
        expect.append((b"GET", k, value(i)))
    for i in range(100):
        k = b"known:list:%d" % i
        items = [b"item-%d-%d" % (i, j) * (1 + j % 5) for j in range(50 + i)]
        cmds.append((b"RPUSH", k, *items))
        expect.append((b"LRANGE", k, items))
        k = b"known:hash:%d" % i
        fields = {b"f%d" % j: b"v%d-%d" % (i, j) * (1 + j % 7) for j in range(30 + i)}
        args = [x for kv in fields.items() for x in kv]
        cmds.append((b"HSET", k, *args))
        expect.append((b"HGETALL", k, fields))
        k = b"known:set:%d" % i
        members = {b"m%d-%d" % (i, j) for j in range(40 + i)}
        cmds.append((b"SADD", k, *sorted(members)))
        expect.append((b"SMEMBERS", k, members))
    for i in range(50):
        k = b"known:zset:%d" % i
        pairs = [(j * 1.5, b"z%d-%d" % (i, j)) for j in range(60)]
        args = [x for sc, m in pairs for x in (repr(sc).encode(), m)]
        cmds.append((b"ZADD", k, *args))
        expect.append((b"ZRANGE", k, [m for _, m in pairs]))
    return cmds, expect


def main():
    port, what = int(sys.argv[1]), sys.argv[2]
    if what == "wait":
        end = time.time() + 10
        while time.time() < end:
            try:
                r = Redis(port)
                # PING answers while the dump is still loading; GET does not.
                if r.cmd("PING") == "PONG":
                    r.cmd("GET", "known:probe")
                    return 0
            except (OSError, RuntimeError):
                pass
            time.sleep(0.05)
        print("redis did not answer PING within 10 s")
        return 2
    r = Redis(port)
    if what == "cmd":
        print(r.cmd(*sys.argv[3:]))
        return 0
    cmds, expect = dataset()
    if what == "load":
        for k in range(0, len(cmds), 200):
            r.pipeline(cmds[k:k + 200])
        print("loaded %d keys" % len(cmds))
        return 0
    if what == "digest":
        for e in expect:
            d = r.cmd("DEBUG", "DIGEST-VALUE", e[1])[0]
            print(e[1].decode(), d.decode() if isinstance(d, bytes) else d)
        return 0
    if what == "verify":
        bad = 0
        for op, k, want in expect:
            if op == b"LRANGE":
                got = r.cmd(op, k, 0, -1)
            elif op == b"ZRANGE":
                got = r.cmd(op, k, 0, -1)
            else:
                got = r.cmd(op, k)
            if op == b"HGETALL":
                got = dict(zip(got[0::2], got[1::2]))
            elif op == b"SMEMBERS":
                got = set(got)
            if got != want:
                bad += 1
                if bad <= 5:
                    print("mismatch: %s %s" % (op.decode(), k.decode()))
        print("verified %d keys, %d mismatches" % (len(expect), bad))
        return 1 if bad else 0
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, RuntimeError, ConnectionError) as e:
        print("error: %s" % e)
        sys.exit(2)
