"""Which integrity header each library's Put Block carries: a logging TCP proxy to Azurite."""

import contextlib
import os
import pathlib
import re
import socket
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "benchmarks"))
from concurrent.futures import ThreadPoolExecutor

import stores as S

from wanrl_s3.testing import azurite_connection_string_parts, local_azure, make_azure_container

seen = []


def pump(src, dst, log):
    buf = b""
    try:
        while d := src.recv(1 << 16):
            if log is not None and len(buf) < 1 << 20:
                buf += d
                for m in re.finditer(
                    rb"(PUT [^ ]*comp=block[^ ]*) HTTP/1.1\r\n(.*?)\r\n\r\n", buf, re.S
                ):
                    hdrs = sorted(
                        h.split(b":")[0].decode().lower() for h in m.group(2).split(b"\r\n")
                    )
                    log.append([h for h in hdrs if "md5" in h or "crc" in h or "checksum" in h])
                buf = buf[-4096:] if len(buf) > 1 << 19 else buf
            dst.sendall(d)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def proxy(up_port, log):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)

    def serve():
        while True:
            c, _ = ls.accept()
            u = socket.create_connection(("127.0.0.1", up_port))
            threading.Thread(target=pump, args=(c, u, log), daemon=True).start()
            threading.Thread(target=pump, args=(u, c, None), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return ls.getsockname()[1]


with local_azure() as conn:
    acct, key, ep = azurite_connection_string_parts(conn)
    port = int(ep.split(":")[2].split("/")[0])
    logs = {}
    for name in ["ours", "obstore", "adlfs"]:
        log = logs[name] = []
        p = proxy(port, log)
        c2 = conn.replace(f":{port}/", f":{p}/")
        os.environ["AZURE_STORAGE_CONNECTION_STRING"] = c2
        cont = make_azure_container(c2)
        data = os.urandom(S.OBJECT_BYTES)
        with ThreadPoolExecutor(8) as pool:
            if name == "ours":
                from wanrl_s3.store import open_store

                S.ours(open_store(f"az://{cont}"), pool, "o").put("k/o", data)
            elif name == "obstore":
                from obstore.store import AzureStore

                S.obstore_candidate(
                    AzureStore(
                        cont,
                        account_name=acct,
                        access_key=key,
                        endpoint=ep.replace(f":{port}/", f":{p}/"),
                        client_options={"allow_http": True},
                    ),
                    "x",
                ).put("k/o", data)
            else:
                import adlfs

                fs = adlfs.AzureBlobFileSystem(connection_string=c2, skip_instance_cache=True)
                fs.service_client._config.max_single_put_size = S.PART_BYTES
                fs.service_client._config.max_block_size = S.PART_BYTES
                S.fsspec_candidate(fs, cont, "a", max_concurrency=4).put("k/o", data)
        time.sleep(0.5)
        print(f"{name:8s} integrity headers of its Put Block: {log[0] if log else None}")
