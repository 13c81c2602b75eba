# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""secret_problems: placeholders and weak secrets are refused, naming the variable and never quoting the value."""

from __future__ import annotations

import base64
import random
import string

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.secrets import secret_problems
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _secrets

NAME = 'site_credential'
GOOD = 'Xq7vLp2RzT9mKw4NbH6sJd3F'
GOOD_KEY = base64.b64encode(random.Random(7).randbytes(1024)).decode()


def problems(value, **options):
    return _secrets.problems(value, NAME, **options)


@pytest.mark.parametrize('value', [
    GOOD,
    'correct horse battery staple',        # four words, none a stock one
    'openssl-rand-3f9a0c5e7b21d4c8',
    '3f9a0c5e7b21d4c86a0e19f2b7d35c4a',    # openssl rand -hex 16
    'ABCDEFGHJKLMNPQRSTUVWXYZ',            # one class, but 24 characters
    'P@ssw0rd-but-then-q8Zr1vNw',          # a stock word among others is not a placeholder
    'Sécret-ünïcode-Passphrase-42',
])
def test_good_secrets_have_no_problem(value):
    assert problems(value) == []


@pytest.mark.parametrize(('value', 'expected'), [
    (_secrets.UNDEFINED, f'{NAME} is not defined'),
    (_secrets.Missing('vault_site_credential'), 'it refers to vault_site_credential, which is not defined'),
    (None, f'{NAME} is null'),
    ('', f'{NAME} is empty'),
    ('   ', 'white space only'),
    (12345678901234567890, 'must be a string, got a number'),
    (True, 'must be a string, got a boolean'),
    (['a'], 'must be a string, got a list'),
    ('CHANGE_ME', 'change-me marker'),
    ('changeme', 'change-me marker'),
    ('change-me-please-0123456789', 'change-me marker'),
    ('Replace Me With Something Long', 'change-me marker'),
    ('q8Zr1vNw TODO q8Zr1vNw q8Zr1vNw', 'TODO-style marker'),
    ('{{ vault_site_credential }}', 'Jinja template that was never rendered'),
    ('{% if x %}secret{% endif %}', 'Jinja template that was never rendered'),
    ('<your database password here>', '<angle-bracket> fill-in'),
    ('password', 'stock words'),
    ('PASSWORD1234567890', 'stock words'),
    ('P4ssw0rd!P4ssw0rd!', 'stock words'),
    ('Admin-Secret-2024-example', 'stock words'),
    ('my_db_password_here_123', 'stock words'),
    ('test-test-test-test', 'stock words'),
    ('xxxxxxxxxxxxxxxxxxxxxxxxx', 'stock words'),
    ('default_default_default', 'stock words'),
    ('Abcdef123456', 'is 12 characters long; it must have at least 16'),
    ('abababababababababab', 'only 2 distinct characters'),
    ('1234567890123456', 'made of digits only'),
    ('qwpoeirutyalskdjfhg', 'made of lower-case letters only'),
    ('QWPOEIRUTYALSKDJFHG', 'made of upper-case letters only'),
    (' ' + GOOD, 'begins or ends with white space'),
    (GOOD + '\n', 'begins or ends with white space'),
])
def test_bad_secrets_are_named(value, expected):
    found = problems(value)
    assert any(expected in sentence for sentence in found), found
    assert all(sentence.startswith(NAME) for sentence in found)


def test_min_length_is_an_option():
    assert problems(GOOD, min_length=32) == [f'{NAME} is 24 characters long; it must have at least 32']
    assert problems('Abcdef123456', min_length=8) == []


def test_forbidden_characters_are_listed_not_the_value():
    assert problems(GOOD + '#x', forbidden_characters='#\n') == [
        f"{NAME} contains characters the file it is written to cannot hold (one of: newline, '#')"]
    assert problems(GOOD, forbidden_characters='#\n') == []


def test_one_class_rule_is_not_repeated_for_a_short_value():
    assert problems('123456789') == [f'{NAME} is 9 characters long; it must have at least 16']


@pytest.mark.parametrize(('value', 'expected'), [
    (GOOD_KEY, None),
    (GOOD_KEY[:100] + '\n' + GOOD_KEY[100:], None),           # wrapped lines are fine
    (base64.b64encode(b'x' * 16).decode(), 'decodes to 16 bytes; the key must have at least 32 bytes'),
    (base64.b64encode(bytes(1024)).decode(), 'decodes to only 1 distinct byte value;'),
    (GOOD_KEY[:-1], 'is not valid base64'),
    (GOOD_KEY[:600] + '!' + GOOD_KEY[600:], 'is not valid base64 (Only base64 data is allowed)'),
    ('CHANGE_ME', 'change-me marker'),
    ('changeme', 'change-me marker'),
])
def test_base64_keys(value, expected):
    found = problems(value, kind='base64', min_bytes=32)
    if expected is None:
        assert found == []
    else:
        assert any(expected in sentence for sentence in found), found


def test_base64_key_size_is_an_option():
    assert problems(base64.b64encode(bytes(range(64))).decode(), kind='base64', min_bytes=128) == [
        f'{NAME} decodes to 64 bytes; the key must have at least 128 bytes']


def test_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match='kind must be one of text, base64'):
        problems(GOOD, kind='hex')


def test_the_filter_checks_its_options():
    assert secret_problems(GOOD, NAME) == []
    assert secret_problems('CHANGE_ME', 'x', min_length=4, kind='base64', min_bytes=4)
    for options in ({'min_length': 0}, {'min_length': '16'}, {'min_bytes': True}, {'forbidden_characters': ['#']},
                    {'kind': 'hex'}):
        with pytest.raises(AnsibleFilterError):
            secret_problems(GOOD, NAME, **options)
    with pytest.raises(AnsibleFilterError, match='name of the variable'):
        secret_problems(GOOD, '')


# Secrets of every kind the rules judge, each with a random part of its own: no sentence may quote any of it.
def _values(rng: random.Random) -> list[tuple[str, dict]]:
    def token(length, alphabet=string.ascii_letters + string.digits + '-_!%^&*.,;:'):
        return ''.join(rng.choice(alphabet) for _position in range(length))

    values = []
    for _round in range(60):
        values += [
            (token(rng.randint(8, 40)), {}),
            (token(rng.randint(8, 12), string.digits), {}),
            (token(rng.randint(16, 23), string.ascii_lowercase), {}),
            (token(8) * 3, {}),
            (token(4) + 'CHANGE_ME' + token(4), {}),
            ('<' + token(10, string.ascii_letters + ' ') + '>', {}),
            ('{{ ' + token(10, string.ascii_lowercase + '_') + ' }}', {}),
            (rng.choice(['P4ssw0rd', 'Secret', 'Admin', 'Example']) + token(8, string.digits), {}),
            (' ' + token(20) + ' ', {}),
            (token(20) + '#' + token(4), {'forbidden_characters': '#\n'}),
            (base64.b64encode(rng.randbytes(rng.randint(6, 31))).decode(), {'kind': 'base64'}),
            (base64.b64encode(rng.randbytes(40)).decode()[:-2] + token(3), {'kind': 'base64'}),
            (base64.b64encode(bytes([rng.randrange(256)]) * 48).decode(), {'kind': 'base64'}),
        ]
    return values


def test_no_sentence_quotes_the_secret():
    rng = random.Random(16)
    judged = 0
    for value, options in _values(rng):
        found = problems(value, **options)
        judged += bool(found)
        text = '\n'.join(found)
        # No stretch of 8 characters of the value (stripped of the white space the rules mention) is in a sentence.
        core = value.strip()
        windows = {core[start:start + 8] for start in range(max(1, len(core) - 7))}
        quoted = sorted(window for window in windows if window in text)
        assert not quoted, (options, found)
    assert judged > 600, 'most generated values have a problem: the loop judges what it should'


def test_random_secrets_pass():
    """Values from the generators the documentation recommends are never refused."""
    rng = random.Random(24)
    for _round in range(3000):
        hex_password = rng.randbytes(24).hex()
        base64_password = base64.b64encode(rng.randbytes(24)).decode()
        alnum_password = ''.join(rng.choice(string.ascii_letters + string.digits) for _position in range(32))
        for value in (hex_password, base64_password, alnum_password):
            assert problems(value) == [], value
        assert problems(base64.b64encode(rng.randbytes(1024)).decode(), kind='base64') == []
