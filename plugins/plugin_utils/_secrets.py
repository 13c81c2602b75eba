# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is wrong with a secret the inventory provides: unset, a placeholder, too short or too simple.

`problems` judges one value and returns one sentence per problem, each naming the variable and none quoting the
value or any part of it: the sentences end up in play output and logs, where the secret must never appear. The
placeholder rule recognises values made only of stock words (change me, password, secret, admin, example, ...),
spelt in any case, with digits for letters (p4ssw0rd), digits and separators around them, template markers left
unrendered, and angle-bracket fill-ins (<your password>). Pure Python with no Ansible import.
"""

from __future__ import annotations

import base64
import binascii
import re
import typing as t


class Missing:
    """Stands for a variable that is not defined (None is a defined null), or one whose value names an undefined one."""

    def __init__(self, undefined_name: t.Optional[str] = None) -> None:
        self.undefined_name = undefined_name


UNDEFINED = Missing()

KINDS = ('text', 'base64')
# A value with fewer distinct characters (base64: decoded byte values) is a pattern, not a secret.
MIN_DISTINCT = 6
# A value of one character class only (all digits, all lower case, ...) must be at least this long.
MIN_LENGTH_ONE_CLASS = 24

# Words people put where a secret belongs until they generate one. A value made only of these (and digits and
# separators) is a placeholder. No single letters: those would let random strings pass as "made of words".
_STOCK_WORDS = frozenset('''
    admin administrator bar baz bind change changeit changeme db database default demo dummy empty enter example
    fill fixme foo foobar generate goes guest hello here in insert it key letmein ldap master me mine munge my mysql
    mariadb new none null of old password passwd pass passphrase placeholder please prometheus put pw pwd qwerty
    random real replace root sample secret set slurm smtp some sssd strong grafana temp test testing the this to
    todo token undefined user value vault very welcome your
'''.split())
# Digits and symbols typed for letters.
_LOOKALIKES = {
    'a': '4@', 'e': '3', 'i': '1!', 'l': '1', 'o': '0', 's': '5$', 't': '7', 'g': '9', 'b': '8', 'z': '2',
}
# The stock words by each character they may begin with (the letter itself or a look-alike).
_WORDS_BY_START: dict[str, tuple[str, ...]] = {}
for _word in sorted(_STOCK_WORDS):
    for _start in _word[0] + _LOOKALIKES.get(_word[0], ''):
        _WORDS_BY_START[_start] = _WORDS_BY_START.get(_start, ()) + (_word,)
_CHANGE_ME = re.compile(r'(?:change|replace)[\s_-]?(?:me|it)', re.IGNORECASE)
_MARKER = re.compile(r'\b(?:TODO|FIXME|TBD)\b')
_TEMPLATE = re.compile(r'\{\{.*\}\}|\{%.*%\}', re.DOTALL)
_FILL_IN = re.compile(r'^<[^<>]*>$', re.DOTALL)
_CLASSES = (('lower-case letters', str.islower), ('upper-case letters', str.isupper), ('digits', str.isdigit))


def problems(value: t.Any, name: str, min_length: int = 16, kind: str = 'text', min_bytes: int = 32,
             forbidden_characters: str = '') -> list[str]:
    """One sentence per problem with the secret `value` of variable `name`; [] when it is fine.

    kind 'text': a password or token, at least min_length characters. kind 'base64': the base64 encoding of a
    binary key of at least min_bytes bytes (white space ignored). forbidden_characters: characters the place the
    secret is written to cannot hold (for example '#' in slurmdbd.conf). Pass a Missing for an undefined variable.
    """
    if kind not in KINDS:
        raise ValueError(f'secret_problems: kind must be one of {", ".join(KINDS)}, got {kind!r}')
    if isinstance(value, Missing):
        # An undefined name that is not part of the variable's own (a.b, a['b']) is another variable it refers to.
        if value.undefined_name and value.undefined_name not in re.split(r"[.\[\]'\"]+", name):
            return [f'{name} is not defined: it refers to {value.undefined_name}, which is not defined; set that '
                    '(in Ansible Vault), it has no default']
        return [f'{name} is not defined; set it (in Ansible Vault), it has no default']
    if value is None:
        return [f'{name} is null; set it to the secret (in Ansible Vault)']
    if not isinstance(value, str):
        return [f'{name} must be a string, got a {_type_name(value)} (quote the value in YAML)']
    if not value.strip():
        return [f'{name} is empty' + (' or white space only' if value else '') + '; set it to a secret (in Ansible Vault)']

    found = []
    placeholder = _placeholder(value)
    if placeholder:
        found.append(f'{name} is a placeholder, not a secret ({placeholder}); generate a random value')
    if kind == 'base64':
        found += _base64_problems(value, name, min_bytes)
    else:
        found += _text_problems(value, name, min_length)
    forbidden = sorted({char for char in forbidden_characters if char in value})
    if forbidden:
        found.append(f'{name} contains characters the file it is written to cannot hold '
                     f'(one of: {", ".join(_describe(char) for char in sorted(set(forbidden_characters)))})')
    return found


def _text_problems(value: str, name: str, min_length: int) -> list[str]:
    found = []
    if value != value.strip():
        found.append(f'{name} begins or ends with white space, which is easily lost or added by mistake')
    if len(value) < min_length:
        found.append(f'{name} is {len(value)} characters long; it must have at least {min_length}')
    distinct = len(set(value))
    if distinct < MIN_DISTINCT:
        found.append(f'{name} has only {_count(distinct, "distinct character")}; a secret needs at least {MIN_DISTINCT}')
    elif len(value) >= min_length and len(value) < MIN_LENGTH_ONE_CLASS:
        only = [label for label, test in _CLASSES if all(test(char) for char in value)]
        if only:
            found.append(f'{name} is made of {only[0]} only; with one kind of character it must have at least '
                         f'{MIN_LENGTH_ONE_CLASS} characters')
    return found


def _base64_problems(value: str, name: str, min_bytes: int) -> list[str]:
    compact = re.sub(r'\s', '', value)
    try:
        key = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as err:
        # The decoder's messages describe the input's shape (padding, length, alphabet), never its content.
        return [f'{name} is not valid base64 ({err}); it must be the base64 encoding of the key']
    found = []
    if len(key) < min_bytes:
        found.append(f'{name} decodes to {len(key)} bytes; the key must have at least {min_bytes} bytes')
    distinct = len(set(key))
    if key and distinct < MIN_DISTINCT:
        found.append(f'{name} decodes to only {_count(distinct, "distinct byte value")}; a key must be random bytes')
    return found


def _placeholder(value: str) -> str:
    """Why value is a placeholder (no part of the value in it), or ''."""
    stripped = value.strip()
    if _CHANGE_ME.search(value):
        return 'it contains a change-me marker'
    if _MARKER.search(value):
        return 'it contains a TODO-style marker'
    if _TEMPLATE.search(value):
        return 'it holds a Jinja template that was never rendered'
    if _FILL_IN.match(stripped):
        return 'it is an <angle-bracket> fill-in'
    if _made_of_stock_words(stripped.lower()):
        return 'it is made of stock words such as those of example files, with digits or separators at most'
    return ''


def _made_of_stock_words(text: str) -> bool:
    """Whether text splits into stock words (in any letter-for-digit spelling), digits and separators only.

    At least one stock word must be there: a value of digits only is judged by the other rules.
    """
    # reach[i]: the most stock words in a split of text[:i], or None when text[:i] does not split.
    reach: list[t.Optional[int]] = [None] * (len(text) + 1)
    reach[0] = 0
    for start in range(len(text)):
        words = reach[start]
        if words is None:
            continue
        char = text[start]
        if not char.isalpha():
            _improve(reach, start + 1, words)
        if char == 'x':
            end = start
            while end < len(text) and text[end] == 'x':
                end += 1
            if end - start >= 3:
                _improve(reach, end, words + 1)
        for word in _WORDS_BY_START.get(char, ()):
            if _spells(text, start, word):
                _improve(reach, start + len(word), words + 1)
    return bool(reach[len(text)])


def _improve(reach: list[t.Optional[int]], end: int, words: int) -> None:
    if reach[end] is None or words > reach[end]:
        reach[end] = words


def _spells(text: str, start: int, word: str) -> bool:
    """Whether text[start:] begins with word, letters possibly typed as look-alike digits or symbols."""
    if start + len(word) > len(text):
        return False
    for offset, letter in enumerate(word):
        char = text[start + offset]
        if char != letter and char not in _LOOKALIKES.get(letter, ''):
            return False
    return True


def _count(number: int, noun: str) -> str:
    return f'{number} {noun}' + ('' if number == 1 else 's')


def _describe(char: str) -> str:
    names = {'\n': 'newline', '\r': 'carriage return', '\t': 'tab', ' ': 'space'}
    return names.get(char, repr(char))


def _type_name(value: t.Any) -> str:
    names = {bool: 'boolean', int: 'number', float: 'number', list: 'list', dict: 'mapping', bytes: 'byte string'}
    for kind, label in names.items():
        if isinstance(value, kind):
            return label
    if isinstance(value, t.Mapping):
        return 'mapping'
    if isinstance(value, (list, tuple)):
        return 'list'
    return type(value).__name__
