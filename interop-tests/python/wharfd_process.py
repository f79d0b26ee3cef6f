"""A real wharfd child process on a port the OS picked (or on the listeners
its config names)."""
import os
import select
import signal
import subprocess
import tempfile
import time

WHARFD = os.environ.get("WHARFD", "")


class Wharfd:
    """A wharfd child process. Pass data_dir to restart a node on the same
    data (same node id)."""

    def __init__(self, *args, config_text=None, data_dir=None, node_id="py", listen="127.0.0.1:0"):
        if not WHARFD or not os.path.exists(WHARFD):
            raise RuntimeError("set WHARFD to the path of the wharfd binary (got %r)" % WHARFD)
        self.dir = tempfile.mkdtemp(prefix="wharf-py-")
        self.data_dir = data_dir or os.path.join(self.dir, "data")
        self.node_id = node_id
        cmd = [WHARFD, "--node-id", node_id, "--data-dir", self.data_dir]
        if listen is not None:  # None: the listeners are in config_text
            cmd += ["--listen", listen]
        if config_text is not None:
            path = os.path.join(self.dir, "wharfd.toml")
            with open(path, "w") as f:
                f.write(config_text)
            cmd += ["--config", path]
        cmd += list(args)
        # Two workers whatever the host's cores (the default on two cores is
        # one), so that hand-offs between threads are exercised.
        if "--threads" not in args:
            cmd += ["--threads", "2"]
        # The log goes to a file: a pipe nobody reads fills up (64 KB) and
        # then blocks the node on its next log line.
        self.log_path = os.path.join(self.dir, "wharfd.log")
        self.killed = False  # by kill(): its exit status means nothing
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log)
        self.port = self._wait_for_port(deadline=time.monotonic() + 10)
        self.pid = self.proc.pid
        self.url = "127.0.0.1:%d" % self.port

    def _wait_for_port(self, deadline):
        line = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1)
                if not chunk:
                    break
                line += chunk
                if chunk == b"\n":
                    text = line.decode()
                    if " listening on " in text:
                        return int(text.strip().rsplit(":", 1)[1])
                    line = b""
        self.proc.kill()
        self.proc.wait(timeout=10)
        raise RuntimeError("wharfd did not start: %s" % self.log())

    def log(self):
        """What the node has logged so far."""
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def kill(self):
        """SIGKILL: a crash, no chance to sync or close anything."""
        self.killed = True
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                raise
        return self.proc.returncode
