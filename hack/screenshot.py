"""Sign in and take screenshots of portal pages with headless Chromium (Debian's), to look at
them as a user would.  python hack/screenshot.py URL USER PASSWORD OUTDIR PATH [PATH ...]"""

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def main(base, username, password, outdir, *paths):
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"{base}/accounts/login/")
        page.screenshot(path=out / "login.png", full_page=True)
        page.fill("#id_login", username)
        page.fill("#id_password", password)
        page.click("form.stacked button[type=submit]")
        page.wait_for_load_state()
        for path in paths:
            page.goto(f"{base}{path}")
            name = path.strip("/").replace("/", "_") or "home"
            page.screenshot(path=out / f"{name}.png", full_page=True)
            print(out / f"{name}.png")
        browser.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
