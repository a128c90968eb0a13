"""Headless Chromium for the report tests: finds the binary and runs it on a
local page, each run with its own throw-away profile folder so runs do not
share state."""
import os
import shutil
import subprocess
import tempfile

# Names the Debian package (chromium) and other distributions install it under.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 60


def find_chromium():
    """Path of a Chromium binary ($CHROMIUM first, then PATH), or None."""
    override = os.environ.get("CHROMIUM")
    if override:
        return shutil.which(override)
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def run_headless(chromium, page, *flags):
    """Runs `chromium --headless ... flags file://page`; its stdout. Fails with
    the last lines of its stderr when it exits non-zero."""
    with tempfile.TemporaryDirectory(prefix="trainsim-chromium-") as profile:
        argv = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
                f"--user-data-dir={profile}", *flags, "file://" + os.path.abspath(page)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}):\n{tail}")
    return done.stdout


def screenshot(chromium, page, png, width=1200, height=3000):
    """Renders `page` into the PNG `png` at width x height CSS pixels."""
    run_headless(chromium, page, f"--screenshot={png}", f"--window-size={width},{height}")


def dump_dom(chromium, page):
    """The page's DOM after it loaded (its scripts have run), as HTML text."""
    return run_headless(chromium, page, "--dump-dom")
