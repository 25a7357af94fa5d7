"""The per-token bucket: a burst, then the rate; each caller its own bucket; 0 is off."""

from __future__ import annotations

import time

from apps.service.middleware import RateLimit


async def _app(scope: object, receive: object, send: object) -> None:  # never called here
    raise AssertionError("the bucket is tested without an app")


def test_each_caller_has_its_own_bucket_which_refills_at_the_rate() -> None:
    limit = RateLimit(_app, rate=10.0, burst=2)
    assert limit._take("a") == 0.0
    assert limit._take("a") == 0.0
    wait = limit._take("a")
    assert 0.0 < wait <= 0.1 + 1e-9  # one request's worth comes back in 1 / rate s
    assert limit._take("b") == 0.0  # another caller is not held by a's bucket
    time.sleep(0.12)
    assert limit._take("a") == 0.0
    assert limit._take("a") > 0.0
