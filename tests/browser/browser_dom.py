# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A minimal element tree over html.parser, enough to query the DOM Chromium serialises with --dump-dom."""

from __future__ import annotations

import html.parser
import typing as t

VOID = frozenset({'area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track', 'wbr'})


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: t.Optional['Element']):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list['Element'] = []
        self.parts: list[t.Any] = []  # text and child elements in document order

    def __repr__(self) -> str:
        return f'<{self.tag} {self.attrs}>'

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get('class') or '').split())

    def text(self) -> str:
        """The text content with runs of white space collapsed to one space."""
        return ' '.join(' '.join(p.text() if isinstance(p, Element) else p for p in self.parts).split())

    def walk(self) -> t.Iterator['Element']:
        for child in self.children:
            yield child
            yield from child.walk()

    def find_all(self, tag: str, cls: t.Optional[str] = None, **attrs: str) -> list['Element']:
        """Descendants by tag, one class and attribute values (``data_node='x'`` matches ``data-node="x"``)."""
        return [el for el in self.walk() if (tag == '*' or el.tag == tag) and (cls is None or cls in el.classes)
                and all(el.attrs.get(key.replace('_', '-')) == value for key, value in attrs.items())]

    def find(self, tag: str, cls: t.Optional[str] = None, **attrs: str) -> 'Element':
        found = self.find_all(tag, cls, **attrs)
        assert len(found) == 1, f'expected one <{tag}> class={cls!r} {attrs}, found {len(found)}'
        return found[0]


class _Builder(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.current = Element('#document', {}, None)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, t.Optional[str]]]) -> None:
        element = Element(tag, {key: value or '' for key, value in attrs}, self.current)
        self.current.children.append(element)
        self.current.parts.append(element)
        if tag not in VOID:
            self.current = element

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, t.Optional[str]]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.current = self.current.parent or self.root

    def handle_endtag(self, tag: str) -> None:
        node: t.Optional[Element] = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is None:
            raise AssertionError(f'</{tag}> closes no open element')
        self.current = node.parent or self.root

    def handle_data(self, data: str) -> None:
        self.current.parts.append(data)


def parse(text: str) -> Element:
    builder = _Builder()
    builder.feed(text)
    builder.close()
    return builder.root
