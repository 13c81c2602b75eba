# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bcrypt hashes for the monitoring web configuration: a matching hash is kept, anything else is replaced.

The decision is tested against a stand-in with bcrypt's interface and hash format (the real package is not a
test dependency); where the real `bcrypt` is importable, one round trip runs against it too.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmforge.cluster.plugins.module_utils import _bcrypt_hash as bh
from ansible_collections.llmforge.cluster.plugins.modules import bcrypt_hash as module
from module_runner import run_module

_STD = b'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
_BCRYPT = b'./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'


def _b64(data: bytes, length: int) -> bytes:
    return base64.b64encode(data).translate(bytes.maketrans(_STD, _BCRYPT))[:length]


class FakeBcrypt:
    """bcrypt's gensalt/hashpw/checkpw and hash layout, with SHA-256 instead of Blowfish; counts new salts."""

    def __init__(self) -> None:
        self.salts = 0

    def gensalt(self, rounds: int = 12, prefix: bytes = b'2b') -> bytes:
        self.salts += 1
        return b'$' + prefix + b'$%02d$' % rounds + _b64(os.urandom(16), 22)

    def hashpw(self, password: bytes, salt: bytes) -> bytes:
        return salt[:29] + _b64(hashlib.sha256(salt[:29] + password).digest(), 31)

    def checkpw(self, password: bytes, hashed_password: bytes) -> bool:
        # As bcrypt: the 22nd salt character carries 2 bits, so only 4 characters can end a salt it made.
        if hashed_password[28:29] not in (b'.', b'O', b'e', b'u'):
            raise ValueError('Invalid salt')
        return self.hashpw(password, hashed_password) == hashed_password


PASSWORD = 'Kq8!vT3#pL9zW2mX'


def test_a_new_hash_has_bcrypt_format_and_the_cost():
    hashed, reused = bh.password_hash(FakeBcrypt(), PASSWORD, cost=10)
    assert not reused
    assert bh.HASH_PATTERN.match(hashed) and hashed.startswith('$2b$10$')


def test_a_matching_hash_is_kept_without_hashing_again():
    backend = FakeBcrypt()
    first, _reused = bh.password_hash(backend, PASSWORD)
    again, reused = bh.password_hash(backend, PASSWORD, current=first)
    assert (again, reused) == (first, True)
    assert backend.salts == 1


@pytest.mark.parametrize(('current', 'why'), [
    pytest.param('', 'none', id='no-current-hash'),
    pytest.param('not a hash', 'garbage', id='not-a-hash'),
    pytest.param('$apr1$abcdefgh$0123456789012345678901', 'other-scheme', id='apr1-hash'),
])
def test_anything_but_a_bcrypt_hash_is_replaced(current, why):
    hashed, reused = bh.password_hash(FakeBcrypt(), PASSWORD, current=current)
    assert not reused and hashed != current, why


def test_a_hash_of_another_password_is_replaced():
    backend = FakeBcrypt()
    old, _reused = bh.password_hash(backend, 'Old-password-1234567')
    new, reused = bh.password_hash(backend, PASSWORD, current=old)
    assert not reused and new != old


def test_a_hash_of_another_cost_is_replaced():
    backend = FakeBcrypt()
    old, _reused = bh.password_hash(backend, PASSWORD, cost=10)
    new, reused = bh.password_hash(backend, PASSWORD, current=old, cost=12)
    assert not reused and new.startswith('$2b$12$')


# The shape of a cost-12 bcrypt hash, but a salt no bcrypt made: bcrypt's checkpw raises ValueError('Invalid salt').
INVALID_SALT = '$2b$12$' + 'z' * 53


def test_a_right_shaped_hash_with_an_invalid_salt_is_replaced():
    backend = FakeBcrypt()
    assert bh.reusable(INVALID_SALT, 12)
    with pytest.raises(ValueError, match='Invalid salt'):
        backend.checkpw(PASSWORD.encode(), INVALID_SALT.encode())
    hashed, reused = bh.password_hash(backend, PASSWORD, current=INVALID_SALT)
    assert not reused and hashed != INVALID_SALT and bh.HASH_PATTERN.match(hashed)
    # The next run keeps the new hash: no new hash on every run.
    assert bh.password_hash(backend, PASSWORD, current=hashed) == (hashed, True)


def test_with_the_real_bcrypt_an_invalid_salt_is_replaced():
    bcrypt = pytest.importorskip('bcrypt')
    current = '$2b$04$' + 'z' * 53
    hashed, reused = bh.password_hash(bcrypt, PASSWORD, current=current, cost=4)
    assert not reused and bcrypt.checkpw(PASSWORD.encode(), hashed.encode())


@pytest.mark.parametrize(('password', 'cost', 'message'), [
    pytest.param('', 12, 'the password is empty', id='empty'),
    pytest.param('é' * 37, 12, 'the password is 74 bytes long; bcrypt uses at most 72', id='over-72-bytes'),
    pytest.param(PASSWORD, 3, 'cost must be a whole number from 4 to 31, got 3', id='cost-too-low'),
    pytest.param(PASSWORD, 32, 'cost must be a whole number from 4 to 31, got 32', id='cost-too-high'),
    pytest.param(PASSWORD, True, 'cost must be a whole number from 4 to 31, got True', id='cost-bool'),
])
def test_input_bcrypt_cannot_take_is_refused(password, cost, message):
    with pytest.raises(bh.BcryptHashError, match=message):
        bh.password_hash(FakeBcrypt(), password, cost=cost)


def test_exactly_72_bytes_is_accepted():
    hashed, _reused = bh.password_hash(FakeBcrypt(), 'x' * 72)
    assert bh.HASH_PATTERN.match(hashed)


def test_with_the_real_bcrypt_a_kept_hash_verifies():
    bcrypt = pytest.importorskip('bcrypt')
    hashed, reused = bh.password_hash(bcrypt, PASSWORD, cost=4)
    assert not reused and bcrypt.checkpw(PASSWORD.encode(), hashed.encode())
    assert bh.password_hash(bcrypt, PASSWORD, current=hashed, cost=4) == (hashed, True)


def run_in_process(args: dict, capsys) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_module_returns_the_kept_hash_and_never_changes(monkeypatch, capsys):
    backend = FakeBcrypt()
    monkeypatch.setattr(module, 'bcrypt', backend)
    current, _reused = bh.password_hash(backend, PASSWORD)
    result = run_in_process({'password': PASSWORD, 'current': current}, capsys)
    assert result['changed'] is False and result['hash'] == current and result['reused'] is True
    assert PASSWORD not in json.dumps(result)


def test_module_makes_a_new_hash_for_one_bcrypt_cannot_check(monkeypatch, capsys):
    monkeypatch.setattr(module, 'bcrypt', FakeBcrypt())
    result = run_in_process({'password': PASSWORD, 'current': INVALID_SALT}, capsys)
    assert not result.get('failed') and result['changed'] is False
    assert result['reused'] is False and result['hash'] != INVALID_SALT and bh.HASH_PATTERN.match(result['hash'])


def test_module_error_does_not_show_the_password(monkeypatch, capsys):
    monkeypatch.setattr(module, 'bcrypt', FakeBcrypt())
    long_password = 'Z' * 80
    result = run_in_process({'password': long_password}, capsys)
    assert result['failed'] is True
    assert result['msg'] == 'cannot hash the password: the password is 80 bytes long; bcrypt uses at most 72'
    assert long_password not in json.dumps(result)


def test_module_without_bcrypt_names_the_package(monkeypatch, capsys):
    monkeypatch.setattr(module, 'bcrypt', None)
    monkeypatch.setattr(module, 'BCRYPT_IMPORT_ERROR', 'ImportError: No module named bcrypt')
    result = run_in_process({'password': PASSWORD}, capsys)
    assert result['failed'] is True and 'python3-bcrypt' in result['msg']


def test_module_runs_through_ansible_in_check_mode():
    """Through the real CLI: where the Python Ansible picks has no bcrypt, the failure names the package."""
    result = run_module('bcrypt_hash', {'password': PASSWORD, 'cost': 4}, check=True)
    if result.get('failed'):
        assert 'python3-bcrypt' in result['msg'], result['msg']
    else:
        assert result['changed'] is False and result['hash'].startswith('$2b$04$')
    assert PASSWORD not in json.dumps(result)
