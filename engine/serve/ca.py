"""The certificate authority of ``amber serve --proxy``, and the environment a client
needs to use the proxy.

The CA is created once per directory (``--ca-dir``, default ``$AMBER_HOME/ca``) in the
file layout mitmproxy reads (``mitmproxy-ca.pem``: key then certificate;
``mitmproxy-ca-cert.pem``: the certificate alone), private key readable by the owner
only. Nothing is installed into system trust: clients opt in through the printed
``SSL_CERT_FILE`` / ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` / ``NODE_EXTRA_CA_CERTS``.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import shlex
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from ambereval.errors import ConfigError

BASENAME = "mitmproxy"  # mitmproxy looks for <confdir>/mitmproxy-ca.pem
CA_NAME = "Amber frozen-web CA"
KEY_BITS = 2048
VALID_DAYS = 3650


def ca_files(ca_dir: Path) -> tuple[Path, Path]:
    """(key + certificate, certificate alone) inside ``ca_dir``."""
    return ca_dir / f"{BASENAME}-ca.pem", ca_dir / f"{BASENAME}-ca-cert.pem"


def ensure_ca(ca_dir: Path) -> Path:
    """Create the CA in ``ca_dir`` unless it is there already; return the certificate
    file clients should trust. Safe against two processes racing to create it."""
    key_file, cert_file = ca_files(ca_dir)
    try:
        ca_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(ca_dir / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if key_file.is_file() and cert_file.is_file():
                return cert_file
            key_pem, cert_pem = _new_ca()
            _write(key_file, key_pem + cert_pem, 0o600)
            _write(cert_file, cert_pem, 0o644)
    except OSError as exc:
        raise ConfigError(f"cannot create the proxy CA in {ca_dir} ({exc.strerror or exc})",
                          hint="choose a writable --ca-dir") from None
    return cert_file


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _new_ca() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "amber-eval")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=2))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, key_cert_sign=True, crl_sign=True,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def proxy_env(host: str, port: int, cert_file: Path) -> list[tuple[str, str]]:
    """The variables that send a client's HTTP(S) through the proxy and make it trust the
    proxy's CA (and only it: nothing else is reachable anyway)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    if ":" in shown:
        shown = f"[{shown}]"
    proxy = f"http://{shown}:{port}"
    cert = str(cert_file.resolve())
    return [("HTTPS_PROXY", proxy), ("https_proxy", proxy), ("HTTP_PROXY", proxy),
            ("http_proxy", proxy), ("SSL_CERT_FILE", cert), ("REQUESTS_CA_BUNDLE", cert),
            ("CURL_CA_BUNDLE", cert), ("NODE_EXTRA_CA_CERTS", cert)]


def base_url_env(url: str, judges: bool = False) -> list[tuple[str, str]]:
    """The variables that point Amber's own capture (or any configurable client) at the
    base-URL server; with a judge, the OpenAI SDK's (``/v1`` included) and google-genai's
    base URLs too."""
    env = [("SERPER_BASE_URL", url), ("JINA_BASE_URL", url)]
    if judges:
        env += [("OPENAI_BASE_URL", f"{url}/v1"), ("GOOGLE_GEMINI_BASE_URL", url)]
    return env


#: keys the SDKs and benchmark scripts refuse to start without; never sent anywhere real
#: (the proxy answers every request) and ignored by Amber: a placeholder when unset
CLIENT_KEYS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "JINA_API_KEY", "SERPER_API_KEY")


def export_lines(env: list[tuple[str, str]], keys: bool = False) -> str:
    """``export NAME=value`` lines, quoted for ``eval "$(...)"``; with ``keys``, the
    clients' API keys kept when set and given a placeholder when not."""
    lines = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env)
    if keys:
        lines += "".join(f'export {name}="${{{name}:-amber-offline}}"\n'
                         for name in CLIENT_KEYS)
    return lines
