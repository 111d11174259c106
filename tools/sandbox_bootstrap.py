"""The bootstrap of an `execute_python` sandbox: run by `python -I -S -B -X utf8 -c` inside it, never imported.

Runs in the sandbox before the code: read the code from stdin into
main.py, start the egress relay when the proxy's socket is there, set the
limits (hard = soft, so the code cannot raise them; CPU's hard limit one
second above, so a program that ignores SIGXCPU is killed), then run the
code as `__main__`.

Arguments: the CPU seconds, address-space bytes, file-size bytes, process count and open files, then
the egress socket's path inside the sandbox.
"""

import os
import resource
import runpy
import select
import socket
import sys
import threading

cpu, memory, fsize, nproc, nofile = (int(a) for a in sys.argv[1:6])
SOCKET = sys.argv[6]
with open("main.py", "wb") as f:
    f.write(sys.stdin.buffer.read())
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
os.close(null)


def _pump(client, upstream):
    peers = {client: upstream, upstream: client}
    try:
        while True:
            for s in select.select(list(peers), [], [])[0]:
                data = s.recv(65536)
                if not data:
                    return
                peers[s].sendall(data)
    except OSError:
        pass
    finally:
        client.close()
        upstream.close()


def _relay(server):
    while True:
        client = server.accept()[0]
        upstream = socket.socket(socket.AF_UNIX)
        try:
            upstream.connect(SOCKET)
        except OSError:
            client.close()
            upstream.close()
            continue
        threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()


if os.path.exists(SOCKET):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    proxy = "http://127.0.0.1:" + str(server.getsockname()[1])
    for name in ("https_proxy", "HTTPS_PROXY"):
        os.environ[name] = proxy
    threading.Thread(target=_relay, args=(server,), daemon=True).start()
for limit, value in (
    (resource.RLIMIT_CPU, (cpu, cpu + 1)),
    (resource.RLIMIT_AS, (memory, memory)),
    (resource.RLIMIT_FSIZE, (fsize, fsize)),
    (resource.RLIMIT_NPROC, (nproc, nproc)),
    (resource.RLIMIT_NOFILE, (nofile, nofile)),
    (resource.RLIMIT_CORE, (0, 0)),
):
    resource.setrlimit(limit, value)
sys.argv = ["main.py"]
del cpu, memory, fsize, nproc, nofile, limit, value, f
runpy.run_path("main.py", run_name="__main__")
