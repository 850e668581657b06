"""Sign-in throttling (and the other per-address limits: sign-ups, fresh page renders for readers not signed in):
failed password checks are counted per account and per address, in the cache.  An attempt
is counted before its password is checked, under a lock across processes (a success is taken back out after), so
attempts sent all at once are never checked beyond a limit.

Three limits, each over a fixed window that starts at its first failure:

* :data:`PER_PAIR` failures for one account from one address in :data:`WINDOW` seconds;
* :data:`PER_ADDRESS` failures from one address, whatever the accounts, in :data:`WINDOW` seconds;
* :data:`PER_ACCOUNT` failures for one account from all addresses in :data:`ACCOUNT_WINDOW` seconds
  (a guess spread over many addresses).

An address the account signed in from before (remembered :data:`KNOWN_SECONDS`) is exempt from the last
two: an attack from elsewhere, or from other accounts behind the same address (a proxy, a campus), does
not lock out the account's owner.

While a limit is reached, every attempt it covers is refused, the right password included, with a message
that says how long to wait; nothing is locked for longer than its window, and a success clears the
account's count for that address.  The checks run in :class:`ThrottledModelBackend`, so the sign-in page,
the admin's and ``authenticate()`` anywhere are covered; :class:`ThrottledAuthenticationForm` shows the
message on the sign-in page.
"""

from __future__ import annotations

import hashlib
import math
import time

from django import forms
from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import caches
from django.core.exceptions import PermissionDenied

WINDOW = 15 * 60
ACCOUNT_WINDOW = 60 * 60
PER_PAIR = 5
PER_ADDRESS = 20
PER_ACCOUNT = 50
KNOWN_SECONDS = 30 * 24 * 3600
#: sign-ups from one address in a day (``settings.SIGNUPS_PER_ADDRESS``, ``UNPOOLED_SIGNUPS_PER_ADDRESS``)
SIGNUPS_PER_ADDRESS, SIGNUP_WINDOW = 10, 24 * 3600
#: fresh (uncached) page renders one address not signed in may cause a minute (``settings.RENDERS_PER_ADDRESS``)
RENDERS_PER_ADDRESS, RENDER_WINDOW = 60, 60
_PREFIX = "unpooled.signin:"


class _Counters:
    """The counters' cache (``CACHES["signin"]``: apart from the pages', whose flood would cull them)."""

    def __getattr__(self, name):
        return getattr(caches["signin"], name)


cache = _Counters()


def _h(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


def address_of(request) -> str:
    """The client's address: ``REMOTE_ADDR``, or behind the TLS proxy (``UNPOOLED_SECURE=1``) the address
    that proxy appended to ``X-Forwarded-For``.  Empty without a request."""
    if request is None:
        return ""
    meta = request.META
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None) and meta.get("HTTP_X_FORWARDED_FOR"):
        return meta["HTTP_X_FORWARDED_FOR"].split(",")[-1].strip()[:64]
    return str(meta.get("REMOTE_ADDR", ""))[:64]


def _account(username) -> str:
    return str(username or "").strip().lower()[:150]


def _keys(account: str, address: str) -> list[tuple[str, int, int]]:
    """(cache key, limit, window) of each limit that applies to an attempt."""
    keys = [(_PREFIX + "pair:" + _h(account, address), PER_PAIR, WINDOW)]
    if address and cache.get(_PREFIX + "known:" + _h(account, address)):
        return keys
    if address:
        keys.append((_PREFIX + "addr:" + _h(address), PER_ADDRESS, WINDOW))
    keys.append((_PREFIX + "acct:" + _h(account), PER_ACCOUNT, ACCOUNT_WINDOW))
    return keys


def _wait(keys, now: float) -> int:
    wait = 0
    for key, limit, window in keys:
        got = cache.get(key)
        if got and got[0] >= limit and now < got[1] + window:
            wait = max(wait, math.ceil(got[1] + window - now))
    return wait


def _counting():
    """One process at a time reads and writes the counters (they are shared by every web process: a read then a
    write by two at once loses a count -- security review N16, 8 password checks let through against a limit of
    5).  Held for the counters only, never while a password is hashed."""
    from unpooled.service.locks import exclusive

    return exclusive("signin-throttle", 0)


def _take(keys) -> int:
    """The seconds to wait if one of ``keys``' limits is reached, else 0 with one more counted under each."""
    with _counting():
        now = time.time()
        wait = _wait(keys, now)
        if not wait:
            for key, _, window in keys:
                got = cache.get(key)
                count, start = (got if got and now < got[1] + window else (0, now))
                cache.set(key, (count + 1, start), int(start + window - now) + 1)
    return wait


def begin_attempt(request, username) -> int:
    """Before a password is checked: the seconds to wait if a limit is reached (the attempt is refused), else 0
    with the attempt already counted as a failure (:func:`end_attempt` takes a success back out), so that
    attempts made at once are counted before any of them is checked."""
    return _take(_keys(_account(username), address_of(request)))


def begin_sign_up(request) -> int:
    """Before an account is made: the seconds to wait when this address made :data:`SIGNUPS_PER_ADDRESS` sign-ups
    in :data:`SIGNUP_WINDOW` seconds (each makes an account, maybe a team with its own upload quota: security
    review N7), else 0 with this one counted."""
    address = address_of(request)
    limit = getattr(settings, "SIGNUPS_PER_ADDRESS", SIGNUPS_PER_ADDRESS)
    return _take([(_PREFIX + "signup:" + _h(address), limit, SIGNUP_WINDOW)]) if address else 0


def end_attempt(request, username, *, ok: bool) -> None:
    """After the check: a success takes its attempt back out of the counts, clears the account's count for this
    address and remembers the address; a failure stays counted."""
    if not ok:
        return
    account, address = _account(username), address_of(request)
    with _counting():
        now = time.time()
        for key, _, window in _keys(account, address)[1:]:
            got = cache.get(key)
            if got and got[0] > 0 and now < got[1] + window:
                cache.set(key, (got[0] - 1, got[1]), int(got[1] + window - now) + 1)
        cache.delete(_PREFIX + "pair:" + _h(account, address))
        if address:
            cache.set(_PREFIX + "known:" + _h(account, address), 1, KNOWN_SECONDS)


def begin_render(request) -> int:
    """Before a page is rendered afresh (not served from the page cache) for someone not signed in: the seconds to
    wait when this address caused :data:`RENDERS_PER_ADDRESS` fresh renders in :data:`RENDER_WINDOW` seconds, else 0
    with this one counted (security review N6: 4 cache-busting requests a second took the whole machine)."""
    if request.user.is_authenticated:
        return 0
    address = address_of(request)
    limit = getattr(settings, "RENDERS_PER_ADDRESS", RENDERS_PER_ADDRESS)
    return _take([(_PREFIX + "render:" + _h(address), limit, RENDER_WINDOW)]) if address else 0


def sign_up_message(wait: int) -> str:
    hours = max(1, -(-wait // 3600))
    return (f"Too many accounts were made from your address today: try again in {hours} hour{'s' if hours != 1 else ''}, "
            "or ask an organiser to add you (unpooled user add).")


def message(wait: int) -> str:
    minutes = max(1, -(-wait // 60))
    return (f"Too many failed sign-ins for this account or from your address: try again in {minutes} minute"
            f"{'s' if minutes != 1 else ''}. Nothing is locked for longer than that.")


class ThrottledModelBackend(ModelBackend):
    """Django's user-name and password check, refused while a limit is reached; failures are counted."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        from django.contrib.auth import get_user_model

        if username is None:
            username = kwargs.get(get_user_model().USERNAME_FIELD)
        if username is None or password is None:
            return None
        wait = begin_attempt(request, username)
        if wait:
            if request is not None:  # authenticate() turns the refusal into a failed sign-in: the form says why
                request.unpooled_throttled = wait
            raise PermissionDenied(message(wait))
        user = super().authenticate(request, username=username, password=password, **kwargs)
        end_attempt(request, username, ok=user is not None)
        return user

    def get_user(self, user_id):
        """The signed-in user of a request, with their profile and team in the same query (every page reads the
        role: :func:`~unpooled.service.accounts.actions.role_of`)."""
        from django.contrib.auth import get_user_model

        from .models import Profile

        user = get_user_model()._default_manager.select_related("profile__team").filter(pk=user_id).first()
        if user is None or not self.user_can_authenticate(user):
            return None
        try:
            user._unpooled_profile = user.profile
        except Profile.DoesNotExist:
            user._unpooled_profile = False
        return user


class ThrottledAuthenticationForm(AuthenticationForm):
    """The sign-in form: says so, and how long to wait, when a limit is reached."""

    throttled = ""   # the message, when a limit refused this attempt

    def clean(self):
        try:
            return super().clean()
        except forms.ValidationError:
            # the backend refused the attempt before checking its password (authenticate() reports that as a failed
            # sign-in): the page says so and how long to wait, not "wrong password"
            wait = getattr(self.request, "unpooled_throttled", 0)
            if wait:
                self.throttled = message(wait)
                raise forms.ValidationError(self.throttled, code="throttled") from None
            raise
