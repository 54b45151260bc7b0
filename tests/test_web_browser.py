"""The web planner driven as a person uses it, in headless Chromium: open the page, change the
GPU count, see the recommendation and charts follow the API's figures, enter an invalid value
and see the command line's message, upload an nccl-tests log and see its grade, download the
report. Each step leaves a screenshot in tests/web-screenshots/."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None or not Path(CHROMEDRIVER).exists():
    pytest.skip(
        "Chromium and chromedriver are not installed (make browser installs Debian's chromium "
        "and chromium-driver)",
        allow_module_level=True,
    )

import uvicorn  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from fabricplan.web import create_app  # noqa: E402
from web_helpers import ROOT, UNDERPERFORMING, cli_text, scenario_body  # noqa: E402

SHOTS = ROOT / "tests" / "web-screenshots"
# Chromium without the outside world: no sign-in, updates, sync or other background requests.
CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1100",
)
WAIT_S = 60


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The planner on a free loopback port, in a thread of this process."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(), log_level="warning"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)
    sock.close()


@pytest.fixture(scope="module")
def downloads(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(server, downloads, tmp_path_factory) -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    for arg in CHROMIUM_ARGS:
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.binary_location = CHROMIUM
    options.add_experimental_option(
        "prefs",
        {"download.default_directory": str(downloads), "download.prompt_for_download": False},
    )
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    SHOTS.mkdir(exist_ok=True)
    print(f"\nscreenshots in {SHOTS}")
    driver.get(server + "/")
    wait_for_state(driver, "ready")
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def api() -> TestClient:
    """The API the page calls, asked directly for the figures the page should show."""
    return TestClient(create_app())


def wait_for_state(driver, *states: str) -> str:
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-state") in states
    )
    return driver.find_element(By.TAG_NAME, "body").get_attribute("data-state")


def type_into(driver, element_id: str, text: str) -> None:
    field = driver.find_element(By.ID, element_id)
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(text)


def chart_values(driver, chart: str) -> dict[tuple[str, str], float]:
    bars = driver.find_elements(By.CSS_SELECTOR, f"#{chart} rect[data-fabric]")
    return {
        (b.get_attribute("data-fabric"), b.get_attribute("data-part")): float(
            b.get_attribute("data-value")
        )
        for b in bars
    }


def step_parts(advice: dict) -> dict[tuple[str, str], float]:
    return {
        (f["fabric"], k.removesuffix("_s")): v
        for f in advice["fabrics"]
        for k, v in f["breakdown"].items()
        if v > 0 and not k.endswith("_total_s")
    }


def shot(driver, name: str) -> None:
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def test_open_then_change_the_gpu_count(browser, api):
    advice = api.post("/api/advise", json=scenario_body()).json()
    rec = advice["recommendation"]
    assert browser.find_element(By.ID, "rec-fabric").text == rec["fabric"]
    assert rec["confidence"] in browser.find_element(By.ID, "rec-confidence").text
    assert chart_values(browser, "chart-step") == pytest.approx(step_parts(advice))
    before = chart_values(browser, "chart-cost")
    shot(browser, "01-open")

    type_into(browser, "f-gpus", "2048")
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_element(By.ID, "results").get_attribute("data-gpus") == "2048"
    )
    wait_for_state(browser, "ready")
    advice = api.post("/api/advise", json=scenario_body("cluster.gpus=2048")).json()
    rec = advice["recommendation"]
    assert browser.find_element(By.ID, "rec-fabric").text == rec["fabric"]
    assert rec["confidence"] in browser.find_element(By.ID, "rec-confidence").text
    assert browser.find_element(By.ID, "cmdline").text.endswith("--set cluster.gpus=2048")
    assert chart_values(browser, "chart-step") == pytest.approx(step_parts(advice))
    after = chart_values(browser, "chart-cost")
    headline = advice["costing"]["headline"]
    assert after == pytest.approx({(f["fabric"], headline): f[headline] for f in advice["fabrics"]})
    assert after != pytest.approx(before)
    shot(browser, "02-gpus-2048")


def test_an_invalid_value_shows_the_command_line_message(browser):
    type_into(browser, "f-gpus", "0")
    wait_for_state(browser, "invalid")
    shown = browser.find_element(By.CSS_SELECTOR, ".field-problem").text
    code, printed = cli_text(
        "scenario",
        "check",
        str(ROOT / "examples/llama3-70b-512-h100.yaml"),
        "--set",
        "cluster.gpus=0",
    )
    assert code == 2 and f"- {shown}" in printed
    assert shown == "cluster.gpus: must be greater than 0 (got 0)"
    shot(browser, "03-invalid")
    browser.find_element(By.ID, "reset").click()
    wait_for_state(browser, "ready")
    assert browser.find_element(By.ID, "results").get_attribute("data-gpus") == "512"


def test_warnings_show_as_the_command_line_prints_them(browser):
    """TCPX ticked beside the example's fabrics loads with the warnings `scenario check`
    prints for the same overrides, word for word: TCPX on the 8 NICs the example gives every
    fabric (A3 High has 4) and, the example being an owned cluster, a fabric only rented.
    Unticked, they go."""
    assert browser.find_elements(By.CSS_SELECTOR, "#warnings li") == []
    browser.find_element(By.CSS_SELECTOR, "#f-fabric input[value='tcpx-200g']").click()
    WebDriverWait(browser, WAIT_S).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "#warnings li")) == 2
    )
    wait_for_state(browser, "ready")
    shown = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#warnings li")]
    sets = browser.find_element(By.ID, "cmdline").text.split(" --set ")[1:]
    assert sets == ["cluster.fabric=[ib-ndr, roce-400g, tcpx-200g]"]
    code, printed = cli_text(
        "scenario",
        "check",
        str(ROOT / "examples/llama3-70b-512-h100.yaml"),
        *(a for s in sets for a in ("--set", s)),
    )
    assert code == 0
    assert shown == [line for line in printed.splitlines() if line.startswith("warning:")]
    assert {
        li.get_attribute("data-field")
        for li in browser.find_elements(By.CSS_SELECTOR, "#warnings li")
    } == {"cluster.nics_per_node", "costs.mode"}
    assert (
        browser.find_element(By.ID, "status").text == "up to date, with 2 warnings under the fields"
    )
    shot(browser, "04-warnings")
    browser.find_element(By.CSS_SELECTOR, "#f-fabric input[value='tcpx-200g']").click()
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, "#warnings li") == []
    )
    wait_for_state(browser, "ready")
    browser.find_element(By.ID, "reset").click()  # the example as it is, for the next tests
    wait_for_state(browser, "ready")
    assert browser.find_element(By.ID, "cmdline").text == "fabricplan advise scenario.yaml"


def test_upload_a_log_and_see_its_grade(browser, api):
    browser.find_element(By.ID, "log-file").send_keys(str(UNDERPERFORMING))
    type_into(browser, "grade-nodes", "2")
    browser.find_element(By.ID, "grade-button").click()
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_element(By.ID, "grade-result").get_attribute("data-state") == "ready"
    )
    data = {"nodes": "2", "scenario": scenario_body()["scenario"]}
    graded = api.post("/api/grade", data=data, files={"log": UNDERPERFORMING.read_bytes()}).json()
    verdict = browser.find_element(By.ID, "grade-verdict").text
    assert verdict == f"Verdict: {graded['verdict'].upper()}" == "Verdict: FAIL"
    text = browser.find_element(By.ID, "grade-result").text
    for finding in graded["findings"]:
        assert finding["code"] in text
    browser.execute_script("document.getElementById('grade').scrollIntoView()")
    shot(browser, "05-graded")


def test_download_the_report(browser, downloads, api):
    browser.find_element(By.ID, "download").click()
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.find_element(By.ID, "download-status").get_attribute("data-state") == "ready"
    )
    path = downloads / "fabricplan-report.html"
    deadline = time.monotonic() + WAIT_S
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    expected = api.post("/api/report", json=scenario_body()).content
    assert path.read_bytes() == expected
    browser.get(path.as_uri())  # the downloaded page opens on its own, with nothing fetched
    WebDriverWait(browser, WAIT_S).until(lambda d: d.find_elements(By.TAG_NAME, "svg"))
    shot(browser, "06-report")
