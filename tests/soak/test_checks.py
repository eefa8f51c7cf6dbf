"""The soak's verdicts: failed reads sorted by kind, and each check against its limit."""

from __future__ import annotations

import time

from soak.checks import Check, Failures, checks
from soak.tally import Failure, Kind
from tests.soak.builders import daemon, figures, key, observed, settings, tally
from tests.soak.conftest import Recorder
from tests.support.servers import Fault

DEFAULTS = settings()


def verdicts(**changes: object) -> dict[str, Check]:
    seen = observed(**changes)
    made = checks(DEFAULTS, seen, Failures.of(seen, DEFAULTS.retries))
    return {check.name: check for check in made}


def failed(**changes: object) -> list[str]:
    return [name for name, check in verdicts(**changes).items() if not check.ok]


def test_a_clean_run_without_proxies_fails_only_for_want_of_injected_faults():
    assert failed() == ["faults injected"]


def test_failures_are_sorted_by_kind_and_unexplained_eio_apart(recorded: Recorder):
    explained, bare = key(path="/o0.bin"), key(path="/o1.bin")
    proxy = recorded(("/o0.bin", Fault.GZIP_BOMB))
    now = time.monotonic()
    run = tally(http=10)
    run.failures += [
        Failure(explained, Kind.EIO, now, now, ""),
        Failure(bare, Kind.EIO, now, now, ""),
        Failure(bare, Kind.WRONG, now, now, ""),
        Failure(bare, Kind.ERROR, now, now, ""),
    ]
    failures = Failures.of(observed(tally=run, proxies={"http": proxy}), retries=4)
    assert (len(failures.eio), len(failures.wrong), len(failures.other)) == (2, 1, 1)
    assert failures.unexplained == [run.failures[1]]


def test_every_target_must_have_been_read():
    assert "reads done" in failed(tally=tally(http=100))
    assert "reads done" in failed(tally=tally(http=100, s3=0))


def test_the_daemon_must_live_until_unmounted_and_exit_0():
    assert failed(alive=False)[0] == "daemon alive until unmounted"
    assert failed(exit_code=None)[0] == "daemon exit status after unmount"
    assert failed(exit_code=1)[0] == "daemon exit status after unmount"
    assert failed(hung=1)[0] == "readers still blocked at the end"


def test_the_peak_rss_may_exceed_the_start_by_the_cache_and_the_slack():
    limit = 100 + 64 + 160  # MiB: start, --cache-size, --rss-slack
    at_limit = verdicts(daemon=daemon(start=figures(100), peak=figures(limit)))
    check = at_limit["daemon peak RSS (MiB)"]
    assert check.ok
    assert (check.value, check.limit) == (324.0, "<= 324.0 (start + cache + slack)")
    above = verdicts(daemon=daemon(start=figures(100), peak=figures(limit + 1)))
    assert not above["daemon peak RSS (MiB)"].ok


def test_fds_and_threads_may_grow_by_their_slack_after_the_warm_up():
    warm, end = figures(fds=100, threads=20), figures(fds=164, threads=28)
    grown = verdicts(daemon=daemon(warm=warm, end=end))
    assert grown["open fds growth after warm-up"] == Check(
        "open fds growth after warm-up", True, 64, "<= 64"
    )
    assert grown["threads growth after warm-up"].ok
    more = verdicts(daemon=daemon(warm=warm, end=figures(fds=165, threads=29)))
    assert not more["open fds growth after warm-up"].ok
    assert not more["threads growth after warm-up"].ok


def test_every_file_handle_must_be_closed_at_the_end():
    assert failed(stats={"open_files": 2})[0] == "open file handles at the end"
    unread = verdicts(stats={})["open file handles at the end"]
    assert (unread.ok, unread.value) == (False, None)


def test_faults_must_have_been_injected_only_when_asked_for(recorded: Recorder):
    proxy = recorded(("/o0.bin", Fault.RESET))
    assert verdicts(proxies={"http": proxy})["faults injected"].ok
    seen = observed()
    no_faults = settings("--fault-share", "0")
    made = checks(no_faults, seen, Failures.of(seen, 4))
    assert "faults injected" not in [check.name for check in made]
    assert all(check.ok for check in made)


def test_a_check_is_a_row_of_the_report():
    assert Check("wrong bytes", False, 3, 0).row() == ("FAIL", "wrong bytes", "3", "0")
