"""One redaction function for everything that leaves the process: tags, params, artifacts, logs.

`redact(value)` returns `value` with every credential replaced by `***`:

* the password of any URL's user info (`scheme://user:PASSWORD@host`),
* the value of any secret-named parameter, in a URL query (`?password=...&token=...`)
  or a libpq-style `key=value` string (`password=... sslpassword=...`),
* bearer tokens (`Authorization: Bearer ...`),
* every *known* secret value wherever it appears: the settings marked secret (see
  `secret_values`), the credentials inside URL settings, and the values of secret-named
  environment variables (`PGPASSWORD`, `MLFLOW_TRACKING_TOKEN`, `*_API_KEY`, ...).

Strings, and mappings and sequences of them (recursively, keys kept; a string under a
secret-named key is masked whole), are redacted; other values pass through. Known
values shorter than `MIN_SECRET_CHARS` are not substituted wherever they occur (they
would mangle ordinary words); the structural patterns above still mask them in place.

`register_secrets` adds values to the process-wide set (`adapters/resources.py` registers
the settings' secrets whenever it builds resources); `RedactingFilter` applies the same
function to log records, and `install_log_redaction` makes every record of every logger
pass through it. This module is pure: it imports neither MLflow nor Prefect.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus, unquote

MASK = "***"
MIN_SECRET_CHARS = 4
SECRET_NAMES = (
    "password|passwd|pwd|pass|sslpassword|secret|client_secret|token|access_token|"
    "refresh_token|id_token|auth|authorization|api_key|apikey|api-key|key|private_key|"
    "credential|credentials|signature|sig"
)
SECRET_ENV = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|APIKEY|CREDENTIAL)", re.I)
"""Environment variables whose values are secrets (`PGPASSWORD`, `MLFLOW_TRACKING_TOKEN`...)."""

_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s]*):(?P<pw>[^@/?#\s]*)@")
_QUERY = re.compile(rf"(?i)(?P<head>[?&;](?:{SECRET_NAMES})=)(?P<v>[^&#\s'\"]*)")
_KEYVALUE = re.compile(
    rf"(?i)(?P<head>(?<![\w.\-])(?:{SECRET_NAMES})\s*[=:]\s*)(?P<v>'[^']*'|\"[^\"]*\"|[^\s,;&'\"]+)"
)
_SECRET_KEY = re.compile(rf"(?i)(?:{SECRET_NAMES})")
_BEARER = re.compile(r"(?i)(?P<head>\bbearer\s+)(?P<v>[A-Za-z0-9._~+/=\-]+)")

_known: set[str] = set()
_lock = threading.Lock()


def _forms(value: str) -> set[str]:
    """A secret as it may appear: raw, URL-quoted (both ways) and URL-unquoted."""
    return {value, quote(value, safe=""), quote_plus(value), unquote(value)}


def register_secrets(values: Iterable[str | None]) -> None:
    """Add known secret values (and their URL-encoded forms) to the process-wide set."""
    with _lock:
        for value in values:
            if value:
                _known.update(f for f in _forms(value) if len(f) >= MIN_SECRET_CHARS)


def known_secrets() -> frozenset[str]:
    """The registered values (for tests and the doctor; never print them)."""
    with _lock:
        return frozenset(_known)


def env_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the secret-named environment variables."""
    env = os.environ if environ is None else environ
    return [v for k, v in env.items() if v and SECRET_ENV.search(k)]


def url_secrets(url: str | None) -> list[str]:
    """The credentials inside a URL: its user-info password and secret query values."""
    if not url:
        return []
    found = [m.group("pw") for m in _USERINFO.finditer(url)]
    found += [m.group("v") for m in _QUERY.finditer(url)]
    return [unquote(f) for f in found if f]


def secret_values(settings: Any) -> list[str]:
    """Every secret in a pydantic settings object: fields marked secret, nested too.

    A field is secret when its type is `SecretStr` or its `json_schema_extra` has
    `"secret": True`; with `"secret": "url"` the field is a URL whose credentials are
    secret (user-info password, secret query parameters).
    """
    out: list[str] = []
    for name, field in type(settings).model_fields.items():
        value = getattr(settings, name)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        mark = extra.get("secret")
        if hasattr(value, "get_secret_value"):
            out.append(value.get_secret_value())
        elif mark == "url":
            out += url_secrets(None if value is None else str(value))
        elif mark is True and value is not None:
            out.append(str(value))
        elif hasattr(type(value), "model_fields"):
            out += secret_values(value)
    return out


def _text(text: str) -> str:
    for secret in sorted(known_secrets(), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    text = _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    for pattern in (_QUERY, _BEARER, _KEYVALUE):
        text = pattern.sub(lambda m: f"{m.group('head')}{MASK}", text)
    return text


def redact(value: Any) -> Any:
    """`value` with every credential masked (strings, and containers of them)."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, Mapping):
        return {
            k: MASK if isinstance(v, str) and _SECRET_KEY.fullmatch(str(k)) else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return type(value)(redact(v) for v in value)
    return value


class RedactingFilter(logging.Filter):
    """A logging filter that masks credentials in the message, its arguments and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place; never drops it."""
        if getattr(record, "_reflexmem_redacted", False):
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed record still must not leak its arguments
            message = str(record.msg)
        record.msg, record.args = _text(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = _text(record.exc_text)
        if record.stack_info:
            record.stack_info = _text(record.stack_info)
        setattr(record, "_reflexmem_redacted", True)  # noqa: B010
        return True


_FILTER = RedactingFilter()
_installed = False


def install_log_redaction() -> None:
    """Make every log record of every logger pass the filter when it is created.

    A record factory covers loggers and handlers configured later (Prefect and MLflow
    set up their own); the filter is also put on the root logger's current handlers.
    Idempotent.
    """
    global _installed
    with _lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _FILTER.filter(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
    for handler in logging.getLogger().handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
