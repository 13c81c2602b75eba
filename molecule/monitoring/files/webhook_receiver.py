# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test stand-in for an alert webhook: appends the body of every POST, one line each, to a log file."""

from __future__ import annotations

import argparse
import http.server
import json


def handler_for(log_path: str) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get('Content-Length', 0)))
            try:
                line = json.dumps(json.loads(body), separators=(',', ':'))
            except ValueError:
                line = body.decode(errors='replace').replace('\n', ' ')
            with open(log_path, 'a', encoding='utf-8') as log:
                log.write(line + '\n')
            self.send_response(200)
            self.end_headers()

        def log_message(self, format, *args):  # noqa: A002 (http.server's signature)
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--port', type=int, default=9099)
    parser.add_argument('--log', default='/var/tmp/alerts.log')
    args = parser.parse_args()
    http.server.ThreadingHTTPServer(('127.0.0.1', args.port), handler_for(args.log)).serve_forever()


if __name__ == '__main__':
    main()
