"""Screenshot a drill's HTML report with headless Chromium.

    python scripts/drill_screenshot.py report.html report.png [--timeout 60]

Chromium is ``$CHROMIUM``, else ``/usr/bin/chromium``, else ``chromium`` or
``chromium-browser`` on the PATH. Exits 2 when it is missing, 1 when it failed,
timed out or wrote no file.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


def find_chromium() -> str | None:
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit if shutil.which(explicit) else None
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def command(chromium: str, html: Path, out: Path, profile: Path) -> list[str]:
    return [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1200,2000",
        f"--screenshot={out}",
        html.as_uri(),
    ]


def screenshot(html: Path, out: Path, timeout: float) -> str | None:
    """Writes ``out``; returns None, or why it could not."""
    chromium = find_chromium()
    if chromium is None:
        return "Chromium not found: install it (apt-get install chromium) or set $CHROMIUM"
    if not html.is_file():
        return f"no such HTML file: {html}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)  # a file left by an earlier run proves nothing
    with tempfile.TemporaryDirectory(prefix="mm-chromium-", ignore_cleanup_errors=True) as profile:
        # Its own session, so a timeout ends Chromium's helper processes along with it.
        proc = subprocess.Popen(
            command(chromium, html.resolve(), out.resolve(), Path(profile)),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"Chromium did not finish within {timeout:.0f} s"
        finally:
            # Helpers (crashpad, zygote) may outlive the browser: end the whole group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            if proc.returncode is None:
                proc.communicate()
    if not out.is_file() or out.stat().st_size == 0:
        tail = output.decode(errors="replace").strip().splitlines()[-10:]
        return f"Chromium (exit {proc.returncode}) wrote no screenshot:\n" + "\n".join(tail)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Screenshot an HTML file with headless Chromium")
    parser.add_argument("html", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    args = parser.parse_args(argv)
    error = screenshot(args.html, args.png, args.timeout)
    if error is not None:
        print(f"drill_screenshot: {error}", file=sys.stderr)
        return 2 if error.startswith("Chromium not found") else 1
    print(args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
