"""What Amazon charges for a HIT's assignments: the worker's reward plus Mechanical Turk's commission.

The commission is 20% of the reward, at least a cent an assignment, and 20% more on a HIT of 10 assignments or
more (Amazon's pricing).  Every share is rounded up to a whole cent: a budget checked with these numbers is never
exceeded by Amazon's rounding."""

from __future__ import annotations

COMMISSION_PERCENT = 20
LARGE_HIT_PERCENT = 20      # added on a HIT of LARGE_HIT_ASSIGNMENTS or more
LARGE_HIT_ASSIGNMENTS = 10
MIN_FEE_CENTS = 1


def _share(cents: int, percent: int) -> int:
    return -(-cents * percent // 100)   # rounded up


def fee_cents(reward_cents: int, max_assignments: int) -> int:
    """Amazon's commission on one assignment of ``reward_cents`` in a HIT of ``max_assignments``."""
    fee = max(MIN_FEE_CENTS, _share(reward_cents, COMMISSION_PERCENT))
    if max_assignments >= LARGE_HIT_ASSIGNMENTS:
        fee += _share(reward_cents, LARGE_HIT_PERCENT)
    return fee


def assignment_cost_cents(reward_cents: int, max_assignments: int) -> int:
    """What one approved assignment costs the requester: its reward and Amazon's commission."""
    return reward_cents + fee_cents(reward_cents, max_assignments)


def hit_cost_cents(reward_cents: int, max_assignments: int) -> int:
    """The most a HIT can cost: every assignment approved."""
    return max_assignments * assignment_cost_cents(reward_cents, max_assignments)
