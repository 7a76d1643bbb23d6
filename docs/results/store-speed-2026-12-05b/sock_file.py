"""Socket -> file: recv_into the file's mmap vs recv_into a warm buffer + pwrite. CPU s/GB."""

import mmap
import os
import resource
import socket
import threading
import time

G = 1 << 30
CH = 1 << 20
payload = os.urandom(8 << 20)


def sender(port):
    s = socket.create_connection(("127.0.0.1", port))
    sent = 0
    while sent < G:
        s.sendall(payload)
        sent += len(payload)
    s.close()


def recv_case(label, fn):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    port = ls.getsockname()[1]
    path = "/tmp/speed-work/sf.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.posix_fallocate(fd, 0, G)
    t = threading.Thread(target=sender, args=(port,))
    t.start()
    c, _ = ls.accept()
    # measure only this thread's CPU (the sender is another thread)
    r0 = resource.getrusage(resource.RUSAGE_THREAD)
    w0 = time.perf_counter()
    fn(c, fd)
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    t.join()
    c.close()
    ls.close()
    os.close(fd)
    os.unlink(path)
    print(
        f"{label:32s} user {r1.ru_utime - r0.ru_utime:.2f} sys {r1.ru_stime - r0.ru_stime:.2f} s/GB  minflt {r1.ru_minflt - r0.ru_minflt}  wall {time.perf_counter() - w0:.2f}"  # noqa: E501
    )


def into_mmap(c, fd):
    m = mmap.mmap(fd, G)
    mv = memoryview(m)
    done = 0
    while done < G:
        n = c.recv_into(mv[done : done + CH])
        if not n:
            break
        done += n
    mv.release()
    m.close()


def bounce_pwrite(c, fd):
    buf = bytearray(CH)
    mv = memoryview(buf)
    done = 0
    while done < G:
        n = c.recv_into(mv)
        if not n:
            break
        os.pwrite(fd, mv[:n], done)
        done += n


def bounce_full(c, fd):  # fill the 1 MiB bounce fully before pwrite (page-aligned writes)
    buf = bytearray(CH)
    mv = memoryview(buf)
    done = 0
    while done < G:
        got = 0
        while got < CH:
            n = c.recv_into(mv[got:])
            if not n:
                break
            got += n
        if not got:
            break
        os.pwrite(fd, mv[:got], done)
        done += got


for _ in range(2):
    recv_case("recv_into mmap (now)", into_mmap)
    recv_case("recv_into 1MiB buf + pwrite", bounce_pwrite)
    recv_case("fill 1MiB buf + pwrite", bounce_full)
