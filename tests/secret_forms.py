"""Every form a secret takes in text, each with the secret it holds: one table, fed to
``redact`` (tests/ops/test_redaction.py) and through every surface that shows a failure's
text (tests/server/test_failure_pages.py)."""

from __future__ import annotations

SECRET = "s3cret"
TOKEN = "pvt_AbCdEf0123456789abcdefGHIJKL_-xyz"
FORMS: tuple[tuple[str, str], ...] = (
    (f"provider said 401 for Authorization: Bearer {SECRET}", SECRET),
    (f"authorization: bearer {SECRET}", SECRET),
    (f"request headers {{'Authorization': 'Bearer {SECRET}'}}", SECRET),
    (f'headers: {{"authorization": "Bearer {SECRET}"}}', SECRET),
    (f"Authorization: Basic {SECRET}==", SECRET),
    (f"sent with Bearer {SECRET}.", SECRET),
    (f"the token {TOKEN} was refused", TOKEN),
    (f"token={TOKEN}", TOKEN),
    (f"password: {SECRET}", SECRET),
    (f"db password : {SECRET} (from the vault)", SECRET),
    (f"Secret: {SECRET}", SECRET),
    (f"api token: {SECRET}", SECRET),
    (f"PGPASSWORD={SECRET}", SECRET),
    (f'{{"password": "{SECRET}"}}', SECRET),
    (f"https://u:{SECRET}@example.invalid/hook", SECRET),
    (f"https://example.invalid/hook?token={SECRET}", SECRET),
)
