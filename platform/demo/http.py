"""A minimal JSON client for the platform's HTTP API (standard library only)."""

import json
import urllib.error
import urllib.request


class ApiError(Exception):
    def __init__(self, status: int, body: dict):
        super().__init__(f"{status}: {body}")
        self.status, self.body = status, body


class Api:
    def __init__(self, base_url: str, api_key: str):
        self.base_url, self.api_key = base_url.rstrip("/"), api_key

    def get(self, path: str) -> dict:
        return self._call("GET", path)

    def post(self, path: str, body: dict) -> dict:
        return self._call("POST", path, body)

    def put(self, path: str, body: dict) -> dict:
        return self._call("PUT", path, body)

    def status_of(self, method: str, path: str, body: dict | None = None) -> int:
        """The HTTP status a request gets, success or not."""
        try:
            return self._request(method, path, body)[0]
        except ApiError as error:
            return error.status

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        raw = self._request(method, path, body)[1]
        return json.loads(raw) if raw else {}

    def _request(self, method: str, path: str, body: dict | None) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.base_url + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.api_key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:  # a proxy's HTML error page, say
                body = {"error": {"message": raw[:200].decode(errors="replace")}}
            raise ApiError(error.code, body) from None
