# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small PNG decoder (standard library only) for the screenshots Chromium writes.

Supports what Chromium's ``--screenshot`` produces: bit depth 8, colour type 2 (RGB) or 6 (RGBA), no interlace,
any of the five scanline filters. Anything else raises ``PngError`` naming what it found.
"""

from __future__ import annotations

import collections
import struct
import typing as t
import zlib

SIGNATURE = b'\x89PNG\r\n\x1a\n'
_CHANNELS = {2: 3, 6: 4}


class PngError(ValueError):
    """Not a PNG this decoder handles; the message says why."""


class Image:
    """Decoded pixels, always as RGB triples; ``rows[y]`` is a bytes object of ``width * 3`` bytes."""

    def __init__(self, width: int, height: int, rows: list[bytes]):
        self.width, self.height, self.rows = width, height, rows

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        row = self.rows[y]
        return row[3 * x], row[3 * x + 1], row[3 * x + 2]

    def histogram(self, box: t.Optional[tuple[int, int, int, int]] = None) -> collections.Counter:
        """Pixel count per (r, g, b) in box (left, top, right, bottom; right and bottom excluded), default all."""
        left, top, right, bottom = box or (0, 0, self.width, self.height)
        left, top = max(left, 0), max(top, 0)
        right, bottom = min(right, self.width), min(bottom, self.height)
        counts: collections.Counter = collections.Counter()
        for y in range(top, bottom):
            row = self.rows[y][3 * left:3 * right]
            # Three interleaved slices zip into (r, g, b) triples much faster than indexing pixel by pixel.
            counts.update(zip(row[0::3], row[1::3], row[2::3]))
        return counts


def _chunks(data: bytes) -> t.Iterator[tuple[bytes, bytes]]:
    if not data.startswith(SIGNATURE):
        raise PngError('not a PNG file: the 8-byte signature is missing')
    at = len(SIGNATURE)
    while at < len(data):
        if at + 8 > len(data):
            raise PngError(f'truncated chunk header at byte {at}')
        length, kind = struct.unpack('>I4s', data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        crc = data[at + 8 + length:at + 12 + length]
        if len(body) != length or len(crc) != 4:
            raise PngError(f'truncated {kind!r} chunk at byte {at}')
        if zlib.crc32(kind + body) != struct.unpack('>I', crc)[0]:
            raise PngError(f'bad CRC in {kind!r} chunk at byte {at}')
        yield kind, body
        if kind == b'IEND':
            return
        at += 12 + length
    raise PngError('no IEND chunk')


def _unfilter(kind: int, line: bytearray, prev: bytes, bpp: int) -> None:
    """Undo one scanline's filter in place (PNG spec section 9)."""
    size = len(line)
    if kind == 0:
        return
    if kind == 1:  # Sub
        for i in range(bpp, size):
            line[i] = (line[i] + line[i - bpp]) & 0xFF
    elif kind == 2:  # Up
        line[:] = bytes((a + b) & 0xFF for a, b in zip(line, prev))
    elif kind == 3:  # Average
        for i in range(bpp):
            line[i] = (line[i] + (prev[i] >> 1)) & 0xFF
        for i in range(bpp, size):
            line[i] = (line[i] + ((line[i - bpp] + prev[i]) >> 1)) & 0xFF
    elif kind == 4:  # Paeth
        for i in range(bpp):
            line[i] = (line[i] + prev[i]) & 0xFF
        for i in range(bpp, size):
            a, b, c = line[i - bpp], prev[i], prev[i - bpp]
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
    else:
        raise PngError(f'unknown scanline filter type {kind}')


def decode(data: bytes) -> Image:
    """Decode a PNG's bytes into an ``Image`` of RGB rows (an alpha channel is dropped)."""
    header = None
    idat = []
    for kind, body in _chunks(data):
        if kind == b'IHDR':
            header = struct.unpack('>IIBBBBB', body)
        elif kind == b'IDAT':
            idat.append(body)
    if header is None:
        raise PngError('no IHDR chunk')
    width, height, depth, colour, compression, filtering, interlace = header
    if depth != 8 or colour not in _CHANNELS:
        raise PngError(f'only 8-bit RGB/RGBA is supported, got bit depth {depth} colour type {colour}')
    if compression or filtering or interlace:
        raise PngError(f'unsupported compression {compression}, filter method {filtering} or interlace {interlace}')
    bpp = _CHANNELS[colour]
    stride = width * bpp
    raw = zlib.decompress(b''.join(idat))
    if len(raw) != height * (stride + 1):
        raise PngError(f'image data is {len(raw)} bytes, expected {height * (stride + 1)} for {width}x{height}')
    rows = []
    prev = bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = bytearray(raw[start + 1:start + 1 + stride])
        _unfilter(raw[start], line, prev, bpp)
        prev = bytes(line)
        if bpp == 4:
            rgb = bytearray(width * 3)
            rgb[0::3], rgb[1::3], rgb[2::3] = prev[0::4], prev[1::4], prev[2::4]
            rows.append(bytes(rgb))
        else:
            rows.append(prev)
    return Image(width, height, rows)


def read(path: t.Any) -> Image:
    with open(path, 'rb') as stream:
        return decode(stream.read())
