"""Issue 31's batches acceptance in Chromium on Laravel 13 too (the issue asks
for both apps; test_batches_page.py runs it on the fixture Laravel 8 app):
the app in its Debian root (laravel_roots.py), qpool and the browser on the
host. A batch of 10 with 2 failures shows 80 % processed and 2 failed, its
page links the failed jobs to their pages, "Retry failed jobs" reruns those 2
and the batch finishes; the back button and a deep link work, and a hostile
batch name stays text. No timing is asserted."""
import pytest

from laravel_roots import laravel_version, version_app  # noqa: F401 (fixtures)

pytest.importorskip("selenium.webdriver")
import test_batches_page as page  # noqa: E402 (a module: its test is not collected twice)
import test_dashboard  # noqa: E402

browser = test_dashboard.browser  # the fixture


@pytest.mark.parametrize("laravel_version", ["13"], indirect=True)
def test_the_batches_page_on_laravel_13(master, version_app, browser, tmp_path):
    page.test_the_batches_page_shows_progress_and_retries_failed_jobs(master, version_app, browser, tmp_path)
