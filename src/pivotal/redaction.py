"""Secrets out of anything Pivotal prints or logs: the one place redaction lives.

``redact_url`` makes one URL fit to show: the password in its userinfo (``user:***@``), the
values of its query parameters and its fragment become ``***``; the scheme, host, port and
path stay, so a person can still tell which ledger or webhook is meant. ``redact`` applies
the same to every URL inside free text (an exception's message, say) and hides every other
form a secret takes there: ``password=...``-like pairs (a libpq conninfo, a query string),
``"secret": "..."`` (JSON), ``password: ...`` (prose, a header dump), an ``Authorization``
header's credentials whatever its scheme, ``Bearer <credential>`` anywhere, and Pivotal's
own ``pvt_`` tokens wherever they appear. The forms are tested as one table
(``tests/secret_forms.py``) fed to this function and through every surface.

Use them on every URL and every foreign error text before it reaches a terminal, a log
record or an HTTP response.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlsplit

__all__ = ["MASK", "redact", "redact_url"]

MASK = "***"

# Query parameters whose values say nothing secret and help a person tell targets apart
# (libpq's and SQLite's options). Every other parameter's value is hidden.
_HARMLESS = frozenset(
    {
        "sslmode",
        "connect_timeout",
        "application_name",
        "target_session_attrs",
        "load_balance_hosts",
        "gssencmode",
        "channel_binding",
        "mode",
        "cache",
        "timeout",
        "format",
        "host",
        "hostaddr",
        "port",
        "dbname",
    }
)

# Schemes whose user name names an account, not a credential; elsewhere (https, say) a
# user name alone is often a token (``https://TOKEN@host``), so it is hidden too.
_ACCOUNT_SCHEMES = ("postgres", "postgresql", "mysql", "mariadb", "sqlite", "redis", "amqp")

# Every pattern below is anchored at the start of a token and bounded, so that redacting a
# long text (a huge argument echoed in an error) stays linear in its length.
_SECRET_NAME = (
    r"(?:[A-Za-z0-9_.-]{0,64}?)"
    r"(?:password|passwd|pwd|passphrase|token|secret|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|secret[_-]?key|sig|signature|auth|authorization|credentials?|session)"
)
_SCHEME = r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}://"

_URL = re.compile(rf"""{_SCHEME}[^\s'"<>`]+""")
_TRAILING = ".,;:!?)]}"
# key=value (a conninfo, a query string, a log line) and "key": "value" (JSON)
_PAIR = re.compile(
    rf"""(?ix)
    (?<![A-Za-z0-9_.-])(?P<key>{_SECRET_NAME})
    (?P<sep>[ \t]{{0,8}}=[ \t]{{0,8}})
    (?P<value>'(?:[^'\\\n]|\\.){{0,1000}}'|"(?:[^"\\\n]|\\.){{0,1000}}"|[^\s&;,'")\]}}]+)
    """
)
_JSON_PAIR = re.compile(
    rf"""(?ix)
    (?P<key>["']{_SECRET_NAME}["'])
    (?P<sep>[ \t]{{0,8}}:[ \t]{{0,8}})
    (?P<value>"(?:[^"\\\n]|\\.){{0,1000}}"|'(?:[^'\\\n]|\\.){{0,1000}}')
    """
)
_USERINFO = re.compile(rf"(?P<scheme>{_SCHEME})(?P<userinfo>[^/?#@\s]{{0,512}})@")
# "name: value" in prose or a header dump, for the names that only ever hold a secret
_COLON_NAME = (
    r"(?:[A-Za-z0-9_.-]{0,64}?)"
    r"(?:password|passwd|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|secret[_-]?key|credentials?)"
)
_COLON_PAIR = re.compile(
    rf"""(?ix)
    (?<![A-Za-z0-9_.-])(?P<key>{_COLON_NAME})
    (?P<sep>[ \t]{{0,8}}:[ \t]{{0,8}})
    (?P<value>'(?:[^'\\\n]|\\.){{0,1000}}'|"(?:[^"\\\n]|\\.){{0,1000}}"|[^\s&;,'")\]}}]+)
    """
)
_CREDENTIAL = r"[A-Za-z0-9._~+/=-]{1,4096}"
# an Authorization header's credentials, whatever its scheme (Bearer, Basic, Digest, ...)
_AUTH_HEADER = re.compile(
    rf"""(?ix)
    (?P<key>authorization["']?[ \t]{{0,8}}[:=][ \t]{{0,8}}["']?)
    (?P<scheme>[A-Za-z-]{{1,20}}[ \t]{{1,8}})?
    (?!(?:bearer|basic|digest|negotiate|ntlm|token)\b)  # a scheme is not its credential
    (?P<value>{_CREDENTIAL})
    """
)
# "Bearer <credential>" anywhere: a credential has a digit or a sign a word has not
_BEARER = re.compile(
    r"(?i)(?P<key>\bbearer[ \t]{1,8})(?P<value>(?=[A-Za-z0-9._~+/=-]{0,4096}[0-9._~+/=])"
    r"[A-Za-z0-9._~+/=-]{4,4096})"
)
# Pivotal's own bearer tokens (``principals.TOKEN_PREFIX``), wherever they appear
_OWN_TOKEN = re.compile(r"\bpvt_[A-Za-z0-9_-]{8,512}")


def _netloc(scheme: str, netloc: str) -> str:
    userinfo, at, host = netloc.rpartition("@")
    if not at:
        return netloc
    user, colon, _password = userinfo.partition(":")
    if colon:
        return f"{user}:{MASK}@{host}"
    if scheme.lower().startswith(_ACCOUNT_SCHEMES):
        return f"{user}@{host}"
    return f"{MASK}@{host}"


def _query(query: str) -> str:
    if not query:
        return query
    pairs = parse_qsl(query, keep_blank_values=True)
    if not pairs:
        return MASK
    shown = []
    for key, value in pairs:
        if key.lower() in _HARMLESS:
            shown.append(f"{quote(key, safe='')}={quote(value, safe='/:,')}")
        else:
            shown.append(f"{quote(key, safe='')}={MASK}")
    return "&".join(shown)


def redact_url(url: str) -> str:
    """``url`` fit to print or log: ``user:***@``, each query value ``***`` (but for a few
    harmless options such as ``sslmode``), a fragment ``***``; scheme, host, port and path
    unchanged. A URL that does not parse is masked as text, by :func:`redact`'s rules."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is no number
    except ValueError:
        return _mask_text(url)
    if "@" not in parts.netloc and not parts.query and not parts.fragment:
        return url
    shown = f"{parts.scheme}:" if parts.scheme else ""
    if parts.netloc or url[len(shown) :].startswith("//"):
        shown += "//" + _netloc(parts.scheme, parts.netloc)
    shown += parts.path
    if parts.query:
        shown += "?" + _query(parts.query)
    if parts.fragment:
        shown += "#" + MASK
    return shown


def _userinfo(match: re.Match[str]) -> str:
    scheme, userinfo = match["scheme"], match["userinfo"]
    user, colon, _ = userinfo.partition(":")
    if colon:
        return f"{scheme}{user}:{MASK}@"
    if scheme.lower().startswith(_ACCOUNT_SCHEMES):
        return match.group(0)
    return f"{scheme}{MASK}@"


def _mask_value(match: re.Match[str]) -> str:
    value = match["value"]
    quote_char = value[0] if value[:1] in ("'", '"') else ""
    return f"{match['key']}{match['sep']}{quote_char}{MASK}{quote_char}"


def _mask_credential(match: re.Match[str]) -> str:
    value = match["value"]
    tail = ""
    while value and value[-1] in _TRAILING:  # the sentence's, not the credential's
        value, tail = value[:-1], value[-1] + tail
    return f"{match['key']}{match.groupdict().get('scheme') or ''}{MASK}{tail}"


def _mask_text(text: str) -> str:
    text = _OWN_TOKEN.sub(f"pvt_{MASK}", text)
    text = _USERINFO.sub(_userinfo, text)
    text = _AUTH_HEADER.sub(_mask_credential, text)
    text = _BEARER.sub(_mask_credential, text)
    text = _JSON_PAIR.sub(_mask_value, text)
    text = _PAIR.sub(_mask_value, text)
    return _COLON_PAIR.sub(_mask_value, text)


def _one_url(match: re.Match[str]) -> str:
    found = match.group(0)
    tail = ""
    while found and found[-1] in _TRAILING:
        found, tail = found[:-1], found[-1] + tail
    return redact_url(found) + tail


def redact(text: str) -> str:
    """``text`` with every URL in it passed through :func:`redact_url` and the value of
    every ``password=...``, ``token=...``, ``"secret": "..."`` (and the like) hidden as
    ``***``: for an exception's message, a log line, an error shown to a person."""
    if not text:
        return text
    return _mask_text(_URL.sub(_one_url, text))
