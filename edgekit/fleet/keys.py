"""Ed25519 keys for signing releases (workstation) and checking them (device).

``edgekit keygen --out signing.key`` writes the private key (PKCS#8 PEM, mode 0600) and beside
it ``signing.pub``: one line ``ed25519:<base64 of the 32 raw bytes>``, the text a device's config
takes as ``[model] public_key``. Only public keys and their ids ever go into logs, status or
manifests. Needs the ``cryptography`` package (the ``fleet`` extra), imported when used.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgekit.errors import ConfigError, EdgekitError

__all__ = ["SignatureError", "SigningKey", "PublicKey", "generate_key", "load_signing_key", "parse_public_key",
           "PREFIX"]

PREFIX = "ed25519:"


class SignatureError(EdgekitError):
    """A signature is missing, malformed, made by another key, or does not match the bytes."""


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise EdgekitError("signed model releases need the cryptography package: "
                           "pip install 'edgekit-tflite[fleet]'") from None
    return ed25519


def key_id(raw_public: bytes) -> str:
    """A short public name of a public key (16 hex digits of its SHA-256), safe to log."""
    return hashlib.sha256(raw_public).hexdigest()[:16]


@dataclass(frozen=True)
class PublicKey:
    """A public key a device trusts. ``text`` is its ``ed25519:...`` form."""

    raw: bytes

    @property
    def id(self) -> str:
        return key_id(self.raw)

    @property
    def text(self) -> str:
        return PREFIX + base64.b64encode(self.raw).decode()

    def verify(self, signature_text: str | bytes, data: bytes, what: str) -> None:
        """Check a base64 signature of `data`.

        Raises:
            SignatureError: the signature is not base64 of 64 bytes, or does not match.
        """
        ed = _crypto()
        from cryptography.exceptions import InvalidSignature

        try:
            sig = base64.b64decode(signature_text.strip() if signature_text else b"", validate=True)
        except ValueError:
            raise SignatureError(f"{what}: the signature is not base64") from None
        if len(sig) != 64:
            raise SignatureError(f"{what}: the signature has {len(sig)} bytes, an ed25519 signature 64")
        try:
            ed.Ed25519PublicKey.from_public_bytes(self.raw).verify(sig, data)
        except InvalidSignature:
            raise SignatureError(f"{what}: the signature does not match (tampered, or signed by another key "
                                 f"than {self.id})") from None

    def __repr__(self) -> str:
        return f"PublicKey(id={self.id})"


@dataclass(frozen=True)
class SigningKey:
    """A private signing key (never printed: its repr shows the public id only)."""

    _private: Any = field(repr=False)
    public: PublicKey

    def sign(self, data: bytes) -> str:
        """The base64 ed25519 signature of `data`."""
        return base64.b64encode(self._private.sign(data)).decode()

    def __repr__(self) -> str:
        return f"SigningKey(public={self.public.id})"


def _public_of(private: Any) -> PublicKey:
    from cryptography.hazmat.primitives import serialization

    raw = private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PublicKey(raw)


def generate_key(out: str | os.PathLike[str]) -> tuple[Path, Path, PublicKey]:
    """Write a new key pair: `out` (private, 0600) and `out` with suffix ``.pub``.

    Raises:
        ConfigError: either file exists already (a key is never overwritten).
    """
    ed = _crypto()
    from cryptography.hazmat.primitives import serialization

    priv_path = Path(out)
    pub_path = priv_path.with_suffix(".pub")
    for p in (priv_path, pub_path):
        if p.exists():
            raise ConfigError(f"{str(p)!r} exists; a key is never overwritten (choose another --out)")
    private = ed.Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    priv_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(priv_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    public = _public_of(private)
    pub_path.write_text(public.text + "\n", encoding="ascii")
    return priv_path, pub_path, public


def load_signing_key(path: str | os.PathLike[str]) -> SigningKey:
    """Read a private key written by :func:`generate_key`.

    Raises:
        ConfigError: the file is missing or not an unencrypted ed25519 PEM key (the message never
            quotes the file's content).
    """
    ed = _crypto()
    from cryptography.hazmat.primitives import serialization

    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the signing key {str(p)!r}: {exc.strerror or exc}") from None
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise ConfigError(f"{str(p)!r} is not an unencrypted PEM private key (make one with edgekit keygen)") from None
    if not isinstance(private, ed.Ed25519PrivateKey):
        raise ConfigError(f"{str(p)!r} is not an ed25519 key (make one with edgekit keygen)")
    return SigningKey(private, _public_of(private))


def parse_public_key(text: str) -> PublicKey:
    """A public key from its ``ed25519:<base64>`` text (what ``signing.pub`` holds).

    Raises:
        ConfigError: not that form, or not 32 bytes.
    """
    t = text.strip()
    if not t.startswith(PREFIX):
        raise ConfigError(f"a public key reads 'ed25519:<base64>' (the line in the .pub file edgekit keygen "
                          f"wrote), got {t[:12]!r}...")
    try:
        raw = base64.b64decode(t[len(PREFIX):], validate=True)
    except ValueError:
        raise ConfigError("the public key after 'ed25519:' is not base64") from None
    if len(raw) != 32:
        raise ConfigError(f"an ed25519 public key has 32 bytes, this one {len(raw)}")
    return PublicKey(raw)
