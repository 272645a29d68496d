"""Process helpers shared by the bench scripts: start-up waits and a clean stop."""
import os
import signal
import subprocess
import sys
import time


def stop_all(procs, timeout=30):
    """SIGTERM every process still running, then wait (SIGKILL past `timeout` s)."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()


def wait_for(path, proc, tries=1200):
    """Waits until `path` exists; exits the script if `proc` dies or it never appears."""
    for _ in range(tries):
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            sys.exit("%s exited at start" % proc.args[0])
        time.sleep(0.05)
    sys.exit("%s did not come up" % path)
