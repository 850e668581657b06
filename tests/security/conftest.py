"""The fixtures the security tests share with test_crowd_integrity.py: an MTurk corpus with posted HITs (``turk``)
and Amazon's API through botocore's Stubber (``stubbed``)."""

from . import test_crowd_integrity as _crowd_integrity

turk = _crowd_integrity.turk
stubbed = _crowd_integrity.stubbed
