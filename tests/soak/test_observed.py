"""What a run saw of its proxies: requests and faults per target."""

from __future__ import annotations

from tests.soak.builders import observed
from tests.soak.conftest import Recorder
from tests.support.servers import Fault


def test_requests_and_faults_are_counted_per_target(recorded: Recorder):
    http = recorded(("/o0.bin", Fault.PASS), ("/o0.bin", Fault.ERROR_503))
    s3 = recorded(("/b/o0.bin", Fault.TRUNCATE))
    seen = observed(proxies={"http": http, "s3": s3})
    assert seen.requests() == {"http": 2, "s3": 1}
    injected = seen.injected()
    assert (injected["http"]["503"], injected["s3"]["truncate"]) == (1, 1)
    assert sum(injected["http"].values()) == 1
