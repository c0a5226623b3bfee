"""The built site in a real headless browser (Debian's chromium and chromedriver, driven by selenium).

Every page of the site built from the fixture results must load from disk with no console error, and each
of its plots must have drawn (plotly draws each visible trace as an SVG group inside the plot's div). A
screenshot of the overview is kept in ``artifacts/`` (git-ignored) for a person to look at. It runs wherever a
Chrome or Chromium and chromedriver are on the PATH (``make browser`` installs Debian's as root; GitHub's hosted
runners have Google Chrome); elsewhere, or where the two do not start together outside GitHub Actions, it is
skipped and says why.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from benchmarks.trees import ROOT
from reports.site import PAGES, build_site

FIXTURE = ROOT / "tests" / "fixtures" / "report_results"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason="no chromium (or google-chrome) and chromedriver on the PATH (make browser installs Debian's, as root)",
    ),
]


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1800",
        "--allow-file-access-from-files",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    from selenium.common.exceptions import WebDriverException

    try:
        driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    except WebDriverException as error:  # the two do not start together: the machine's fault, not the site's
        if os.environ.get("GITHUB_ACTIONS") == "true":  # where the workflow provides them, a failure is news
            raise
        pytest.skip(f"{CHROMIUM} with {CHROMEDRIVER} did not start: {error.msg}")
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build_site(FIXTURE, out)
    return out


def _drawn_plots(driver) -> tuple[int, int]:
    return driver.execute_script(
        "const divs = [...document.querySelectorAll('.plotly-graph-div')];"
        "return [divs.length, divs.filter(d => d.querySelector('svg.main-svg g.trace')).length];"
    )


@pytest.mark.parametrize("page", list(PAGES))
def test_page_loads_without_console_errors_and_its_plots_render(browser, site, page):
    from selenium.webdriver.support.wait import WebDriverWait

    browser.get_log("browser")  # drop what earlier pages logged
    browser.get((site / page).as_uri())
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return document.readyState") == "complete")
    WebDriverWait(browser, 60).until(lambda d: _drawn_plots(d)[0] == _drawn_plots(d)[1])
    total, drawn = _drawn_plots(browser)
    if page not in ("machines.html", "findings.html"):  # tables only
        assert total > 0, f"{page} has no plot"
    assert drawn == total
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == [], errors
    assert browser.execute_script("return typeof Plotly") == "object"  # the bundled plotly.js loaded
    if page == "index.html":
        artifacts = ROOT / "artifacts"
        artifacts.mkdir(exist_ok=True)
        height = browser.execute_script("return document.body.scrollHeight")
        browser.set_window_size(1400, min(height, 6000))
        browser.save_screenshot(str(artifacts / "overview.png"))
        browser.set_window_size(1400, 1800)
