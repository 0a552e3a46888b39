"""Browser tests of the console: Playwright driving Debian's Chromium (it cannot download its
own here; scripts/setup installs Debian's) against a live server. A missing browser fails
these tests, never skips them. Each test saves screenshots of the pages it checks under
test-artifacts/console/ (CONSOLE_SCREENSHOTS overrides), a folder CI can keep."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import Page

CHROMIUM = "/usr/lib/chromium/chromium"
SCREENSHOTS = Path(os.environ.get("CONSOLE_SCREENSHOTS", Path(__file__).resolve().parents[3] / "test-artifacts" / "console"))


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args, django_db_setup, orm_beside_playwright):
    # The test database first: once Playwright's event loop runs in this thread, Django refuses
    # the ORM there (see orm_beside_playwright).
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: scripts/setup installs Debian's chromium"
    return {**browser_type_launch_args, "executable_path": CHROMIUM}


@pytest.fixture(scope="session", autouse=True)
def orm_beside_playwright():
    # Playwright's sync API leaves an event loop marked running in the tests' thread until the
    # session ends, and Django refuses the ORM there unless told that this thread serves no async
    # code. So browser tests run last (tests/conftest.py), and from the first one on, it is told.
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if before is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE")
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture
def screenshot(page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(name: str, of: Page | None = None) -> None:
        (of or page).screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)

    return take
