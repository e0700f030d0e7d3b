"""simpleperf as students write it: small clients and servers in the styles a networking
course's reports show, written here from the assignment's text alone -- this file imports
nothing from pcapstats (it runs as a plain script, standard library only) -- so that `verify`
is tested against implementations it did not write.  Run it inside lab hosts:

    python3 course_simpleperf.py server --style recv1000|endswith|socketserver -b IP -p PORT
                                        [--count N] [--ack TEXT]
    python3 course_simpleperf.py client -I IP -p PORT (-t S | -n BYTES) [-i S] [-P N]
                                        [--fill x|0|random] [--msg BYTES] [-f B|KB|MB]
                                        [--decimals D] [--layout tight|wide|tabs]
                                        [--bye-with-last] [--noread] [--wait-close]
                                        [--after-bye N]
                                        [--no-bye] [--reset]

Servers (``--ack``: what they answer to BYE, default ``ACK: BYE``; "" answers nothing and
closes; each exits after ``--count`` connections):

- ``recv1000``: the course report's server: ``data = conn.recv(1000)`` in a loop until
  ``"BYE" in data.decode()``, then ``conn.sendall(b"ACK: BYE")`` and ``conn.close()`` at once
  -- it closes first.  Prints ``ID  Interval  Received  Rate`` rows.
- ``endswith``: reads 64 KiB chunks until the bytes so far end with ``b"BYE"`` (any fill,
  random bytes too), answers, reads until the client has closed, then closes.
- ``socketserver``: ``socketserver.ThreadingTCPServer`` with a handler that collects
  ``request.recv(4096)`` into a bytearray until it ends with ``b"BYE"`` and answers; the
  server's shutdown_request closes (SHUT_WR first).  Serves -P connections at once.

The client (one thread a connection with ``-P``) sends ``--msg``-byte messages (default 1000)
of ``--fill`` (``random``: seeded random bytes, the third message with ``BYE`` in its middle,
at stream offset 2500) for ``-t`` seconds or ``-n`` bytes (the last message shorter), then
``s.send("BYE".encode())``, reads the answer with ``s.recv(1024)`` and closes; it prints
``ID  Interval  Transfer  Bandwidth`` rows (with ``-i`` one an interval, then the summary),
Transfer in ``-f`` units (1 KB = 1000 B) with ``--decimals`` decimals, the columns laid out by
``--layout``.  Quirks: ``--bye-with-last`` sends BYE in the same write as the last message;
``--noread`` closes right after BYE without reading the answer; ``--wait-close`` reads on
after the answer until the server has closed, then closes.  Mistakes: ``--after-bye N`` sends
N more fill bytes after BYE, ``--no-bye`` never sends BYE (and closes at once), ``--reset``
closes with an RST (SO_LINGER 0) after reading the answer.
"""

import argparse
import random
import socket
import socketserver
import struct
import sys
import threading
import time

UNITS = {"B": 1, "KB": 1000, "MB": 1000 * 1000}
HEADER = ("ID", "Interval", "Transfer", "Bandwidth")


# -- output ----------------------------------------------------------------------------------

def row(layout, ident, start, end, nbytes, unit, decimals, span=None, megabytes=False):
    """One table row: Bandwidth is bytes * 8 / the interval's real length (span) in Mbps --
    or, with ``megabytes`` (a mistake seen in a course's submission), MB/s labelled Mbps."""
    span = (end - start) if span is None else span
    if unit == "B":
        transfer = "%d B" % nbytes
    else:
        transfer = "%.*f %s" % (decimals, nbytes / UNITS[unit], unit)
    mbps = nbytes * (1 if megabytes else 8) / span / 1e6 if span > 0 else 0.0
    cells = (ident, "%.1f - %.1f" % (start, end), transfer, "%.2f Mbps" % mbps)
    return lay(layout, cells)


def lay(layout, cells):
    if layout == "wide":
        return "%-24s%-18s%-16s%s" % cells
    if layout == "tabs":
        return "\t".join(cells)
    return "  ".join(cells)


# -- client ----------------------------------------------------------------------------------

def messages(args):
    """The message to send at a given count (the fill decides)."""
    size = args.msg
    if args.fill == "random":
        rng = random.Random(15)
        pool = [rng.randbytes(size) for _ in range(8)]
        middle = size // 2
        pool[2] = pool[2][:middle] + b"BYE" + pool[2][middle + 3:]   # BYE inside a message
        return lambda k: pool[k % len(pool)]
    block = (args.fill * size).encode()
    return lambda k: block


def connection(args, out, lock, printed):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect((args.I, args.p))
    ident = "%s:%d" % (s.getpeername() if args.id_server else s.getsockname())
    message = messages(args)
    start = time.time()
    sent, k = 0, 0
    mark, at_mark = args.i, 0
    last_write = None

    def interval_rows(now):
        nonlocal mark, at_mark
        while args.i and now - start >= mark:
            with lock:
                out.append(row(args.layout, ident, mark - args.i, mark, sent - at_mark,
                               args.f, args.decimals, span=args.i))
            at_mark, mark = sent, mark + args.i

    while True:
        now = time.time()
        interval_rows(now)
        if args.n is not None:
            left = args.n - sent
            if left <= 0:
                break
            data = message(k)[:left]
            final = left <= len(data)
        else:
            if now - start >= args.t:
                break
            data = message(k)
            final = False
        if args.bye_with_last and final:
            last_write = data          # sent below, with BYE in the same write
            sent += len(data)
            break
        s.sendall(data)
        sent += len(data)
        k += 1
    if args.bye_with_last and last_write is None:   # -t: one more message carries BYE
        last_write = message(k)
        sent += len(last_write)
    sending_ended = time.time()
    if args.i and sent > at_mark:
        with lock:
            out.append(row(args.layout, ident, mark - args.i, sending_ended - start,
                           sent - at_mark, args.f, args.decimals))
    if not args.no_bye:
        if last_write is not None:
            s.sendall(last_write + b"BYE")
        else:
            s.send("BYE".encode())
        if args.after_bye:
            s.sendall((message(0) * (args.after_bye // args.msg + 1))[:args.after_bye])
    answer = b""
    if not args.noread and not args.no_bye:     # no BYE: nothing to wait for
        try:
            s.settimeout(30)
            answer = s.recv(1024)
            while args.wait_close and answer and s.recv(1024):   # until the server closes
                pass
        except (ConnectionResetError, socket.timeout):
            pass
    if args.reset:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    elapsed = time.time() - start
    printed.append((ident, row(args.layout, ident, 0.0, elapsed, sent, args.f, args.decimals,
                               megabytes=args.mbytes_as_mbps), answer))


def client(args):
    print("-" * 60)
    print("A simpleperf client connecting to server %s, port %d" % (args.I, args.p))
    print("-" * 60, flush=True)
    out, lock, printed = [], threading.Lock(), []
    threads = [threading.Thread(target=connection, args=(args, out, lock, printed))
               for _ in range(args.P)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(lay(args.layout, HEADER))
    for line in out:
        print(line)
    if args.i:
        print("-" * 60)
    for ident, line, answer in sorted(printed):
        print(line)
    for ident, line, answer in sorted(printed):
        print("# %s got %r" % (ident, answer), file=sys.stderr)
    return 0 if len(printed) == args.P else 1


# -- servers ---------------------------------------------------------------------------------

def listener(args):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((args.b, args.p))
    srv.listen(5)
    print("A simpleperf server is listening on port %d" % args.p, flush=True)
    return srv


def server_recv1000(args):
    srv = listener(args)
    for _ in range(args.count):
        conn, addr = srv.accept()
        conn.settimeout(30)
        start, total = time.time(), 0
        while True:
            data = conn.recv(1000)
            if not data:
                break
            if "BYE" in data.decode():
                total += len(data) - 3
                if args.ack:
                    conn.sendall(args.ack.encode())
                break
            total += len(data)
        conn.close()
        elapsed = time.time() - start
        print(lay("tight", ("ID", "Interval", "Received", "Rate")))
        print(row("tight", "%s:%d" % addr, 0.0, elapsed, total, "MB", 2), flush=True)
    srv.close()
    return 0


def server_endswith(args):
    srv = listener(args)
    for _ in range(args.count):
        conn, addr = srv.accept()
        conn.settimeout(30)
        tail, bye = b"", False
        while True:
            data = conn.recv(65536)
            if not data:
                break
            tail = (tail + data)[-3:]
            if tail == b"BYE":
                bye = True
                break
        if bye and args.ack:
            conn.sendall(args.ack.encode())
            try:
                while conn.recv(1024):     # until the client has closed
                    pass
            except (ConnectionResetError, socket.timeout):
                pass
        conn.close()
    srv.close()
    return 0


def server_socketserver(args):
    answer = args.ack.encode()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self):
            self.request.settimeout(30)
            data = bytearray()
            while not data.endswith(b"BYE"):
                chunk = self.request.recv(4096)
                if not chunk:
                    return
                data += chunk
            if answer:
                self.request.sendall(answer)

    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True

    with Server((args.b, args.p), Handler) as srv:
        print("A simpleperf server is listening on port %d" % args.p, flush=True)
        for _ in range(args.count):
            srv.handle_request()
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--style", choices=("recv1000", "endswith", "socketserver"),
                   default="recv1000")
    s.add_argument("-b", default="0.0.0.0")
    s.add_argument("-p", type=int, default=8088)
    s.add_argument("--count", type=int, default=1)
    s.add_argument("--ack", default="ACK: BYE")
    c = sub.add_parser("client")
    c.add_argument("-I", default="127.0.0.1")
    c.add_argument("-p", type=int, default=8088)
    c.add_argument("-t", type=float, default=None)
    c.add_argument("-n", type=int, default=None)
    c.add_argument("-i", type=float, default=None)
    c.add_argument("-P", type=int, default=1)
    c.add_argument("-f", choices=tuple(UNITS), default="MB")
    c.add_argument("--decimals", type=int, default=2)
    c.add_argument("--layout", choices=("tight", "wide", "tabs"), default="tight")
    c.add_argument("--fill", choices=("x", "0", "random"), default="x")
    c.add_argument("--msg", type=int, default=1000)
    c.add_argument("--bye-with-last", action="store_true")
    c.add_argument("--noread", action="store_true")
    c.add_argument("--wait-close", action="store_true")
    c.add_argument("--after-bye", type=int, default=0)
    c.add_argument("--no-bye", action="store_true")
    c.add_argument("--reset", action="store_true")
    c.add_argument("--id-server", action="store_true")     # ID: the server's ip:port
    c.add_argument("--mbytes-as-mbps", action="store_true")  # MB/s printed as Mbps
    args = p.parse_args(argv)
    if args.role == "client":
        if args.t is None and args.n is None:
            args.t = 10.0
        return client(args)
    return {"recv1000": server_recv1000, "endswith": server_endswith,
            "socketserver": server_socketserver}[args.style](args)


if __name__ == "__main__":
    sys.exit(main())
