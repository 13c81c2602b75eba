# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bcrypt hashes for the web configuration of Prometheus and Alertmanager (basic_auth_users).

A new hash takes a random salt, so hashing the same password on every run would rewrite the configuration every
time. `password_hash` keeps the hash already in place when it still matches the password and the cost, and makes a
new one only when it does not. The bcrypt implementation is passed in (the `bcrypt` package on the managed node):
this file needs nothing outside the standard library.
"""

from __future__ import annotations

import re
import typing as t

# bcrypt reads at most 72 bytes of a password; newer releases refuse longer ones, older ones cut them silently.
MAX_PASSWORD_BYTES = 72
MIN_COST = 4
MAX_COST = 31
# $2b$12$ + 22 characters of salt + 31 of hash, in bcrypt's base64 alphabet.
HASH_PATTERN = re.compile(r'^\$2[aby]\$(?P<cost>[0-9]{2})\$[./A-Za-z0-9]{53}$')


class BcryptHashError(ValueError):
    """A password or cost bcrypt cannot take."""


class Backend(t.Protocol):
    """What `password_hash` needs of the bcrypt package."""

    def gensalt(self, rounds: int, prefix: bytes) -> bytes: ...

    def hashpw(self, password: bytes, salt: bytes) -> bytes: ...

    def checkpw(self, password: bytes, hashed_password: bytes) -> bool: ...


def check_input(password: str, cost: int) -> bytes:
    """The password as bytes, after checking that bcrypt can hash it at this cost."""
    if not isinstance(password, str) or not password:
        raise BcryptHashError('the password is empty')
    encoded = password.encode('utf-8')
    if len(encoded) > MAX_PASSWORD_BYTES:
        raise BcryptHashError(f'the password is {len(encoded)} bytes long; bcrypt uses at most {MAX_PASSWORD_BYTES}')
    if isinstance(cost, bool) or not isinstance(cost, int) or not MIN_COST <= cost <= MAX_COST:
        raise BcryptHashError(f'cost must be a whole number from {MIN_COST} to {MAX_COST}, got {cost!r}')
    return encoded


def reusable(current: t.Optional[str], cost: int) -> bool:
    """Whether `current` is a bcrypt hash of this cost (only such a hash is checked against the password)."""
    match = HASH_PATTERN.match(current or '')
    return bool(match) and int(match.group('cost')) == cost


def matches(backend: Backend, encoded: bytes, current: t.Optional[str], cost: int) -> bool:
    """Whether `current` is a bcrypt hash of the password `encoded` at `cost`; False for one bcrypt cannot check."""
    if not reusable(current, cost):
        return False
    try:
        return bool(backend.checkpw(encoded, current.encode('ascii')))
    except (ValueError, TypeError):
        # A hash of the right shape whose salt bcrypt refuses ('Invalid salt') is replaced, never a failure every run.
        return False


def password_hash(backend: Backend, password: str, current: t.Optional[str] = None, cost: int = 12) -> tuple[str, bool]:
    """(hash, reused): `current` when it is a bcrypt hash of `password` at `cost`, else a new hash with a random salt
    (also when bcrypt cannot check `current`)."""
    encoded = check_input(password, cost)
    if matches(backend, encoded, current, cost):
        return current, True
    return backend.hashpw(encoded, backend.gensalt(rounds=cost, prefix=b'2b')).decode('ascii'), False
